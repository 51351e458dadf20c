#!/usr/bin/env bash
# A headless browser for tests/serving/test_page_in_browser.py: Playwright (the browser extra)
# driving Debian's Chromium, installed with apt-get where this runs as root. Best effort: the
# test says why it is skipped when there is none.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/installer.sh
. scripts/installer.sh
with_uv -e ".[browser]" 2>/dev/null \
  || .venv/bin/python -m pip install -q --retries 0 --timeout 15 -e ".[browser]" 2>/dev/null \
  || { echo "setup: Playwright (pip extra 'browser') not installed: the browser test will be skipped" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  timeout 600 apt-get install -y -q chromium >/dev/null 2>&1 \
    || { timeout 300 apt-get update -q >/dev/null 2>&1 && timeout 600 apt-get install -y -q chromium >/dev/null 2>&1; } \
    || echo "setup: apt-get could not install chromium: the browser test will be skipped" >&2
else
  echo "setup: no chromium, and apt-get needs root here: the browser test will be skipped" >&2
fi
