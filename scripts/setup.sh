#!/usr/bin/env bash
# Installs everything sparkcdc needs on Debian 12 (run as root): MariaDB (and its test suite),
# PostgreSQL 15 (meta DB tests), Java 17 (Spark), Chromium and its driver (the dashboard's
# browser test), and a .venv with the package.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
need_apt=()
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)  # the C extensions (capture/_rowdecode.c, capture/_textrows.c, codec/_canaljson.c)
"$PY" -c 'import sysconfig,os,sys;sys.exit(not os.path.exists(sysconfig.get_paths()["include"]+"/Python.h"))' \
  || need_apt+=(python3-dev)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)
# MariaDB's own test files and their runner, replayed as a workload by tests/oracle.
command -v mariadb-test >/dev/null 2>&1 || need_apt+=(mariadb-test)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
[ -x /usr/lib/postgresql/15/bin/initdb ] || need_apt+=(postgresql-15)
# The dashboard test drives a headless browser through selenium and the distribution's driver.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
[ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.sparkcdc-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
  || [ src/sparkcdc/capture/_rowdecode.c -nt "$stamp" ] || ! ls src/sparkcdc/capture/_rowdecode*.so >/dev/null 2>&1 \
  || [ src/sparkcdc/capture/_textrows.c -nt "$stamp" ] || ! ls src/sparkcdc/capture/_textrows*.so >/dev/null 2>&1 \
  || [ src/sparkcdc/codec/_canaljson.c -nt "$stamp" ] || ! ls src/sparkcdc/codec/_canaljson*.so >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch "$stamp"
fi
echo "setup: ok ($(.venv/bin/python --version), $(java -version 2>&1 | head -1))"
