#!/usr/bin/env bash
# Installs Debian's Chromium for the headless-browser test of the HTML report (tests/report/test_chromium.py:
# it renders a report offline and checks that every chart drew). Without chromium that test is skipped.
#
# Usage: scripts/install_chromium.sh      Idempotent; needs root for apt-get (Debian 12 "bookworm" or later).
# What it runs:  apt-get update && apt-get install -y chromium fonts-dejavu-core
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  chromium --version 2>/dev/null || true
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
chromium --version 2>/dev/null
