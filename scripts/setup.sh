#!/usr/bin/env bash
# Installs what sparkcdc needs on Debian 12 (run as root), in one of two sets:
#
#   scripts/setup.sh demo   what `make demo` runs: MariaDB, Java 17 (Spark), gcc + Python headers
#                           (the C extensions) and a .venv with the package (`pip install -e .`);
#   scripts/setup.sh        (or `all`) that, plus what the tests need: MariaDB's own test suite
#                           (tests/oracle), PostgreSQL 15 (meta DB tests), Chromium and its driver
#                           (the dashboard's browser test), and the `dev` extra in the .venv.
#
# Only what is missing is installed, so `demo` then `all` adds the test set on top.
set -euo pipefail
cd "$(dirname "$0")/.."

level=${1:-all}
case "$level" in
  demo | all) ;;
  *)
    echo "usage: scripts/setup.sh [demo|all]  (demo: what make demo runs; all: also the tests' needs)" >&2
    exit 2
    ;;
esac

PY=${PYTHON:-python3}
need_apt=()
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)  # the C extensions (capture/_rowdecode.c, capture/_textrows.c, codec/_canaljson.c)
"$PY" -c 'import sysconfig,os,sys;sys.exit(not os.path.exists(sysconfig.get_paths()["include"]+"/Python.h"))' \
  || need_apt+=(python3-dev)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
if [ "$level" = all ]; then
  # MariaDB's own test files and their runner, replayed as a workload by tests/oracle.
  command -v mariadb-test >/dev/null 2>&1 || need_apt+=(mariadb-test)
  [ -x /usr/lib/postgresql/15/bin/initdb ] || need_apt+=(postgresql-15)
  # The dashboard test drives a headless browser through selenium and the distribution's driver.
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  [ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
fi
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
# The stamp holds what was installed: "runtime" (the package) or "dev" (the package and its dev
# extra). It is redone when the package's sources of its build changed or more is wanted.
stamp=.venv/.sparkcdc-installed
if [ "$level" = all ]; then want=dev; spec='.[dev]'; else want=runtime; spec='.'; fi
have=$(cat "$stamp" 2>/dev/null || true)
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
  || { [ "$want" = dev ] && [ "$have" != dev ]; } \
  || [ src/sparkcdc/capture/_rowdecode.c -nt "$stamp" ] || ! ls src/sparkcdc/capture/_rowdecode*.so >/dev/null 2>&1 \
  || [ src/sparkcdc/capture/_textrows.c -nt "$stamp" ] || ! ls src/sparkcdc/capture/_textrows*.so >/dev/null 2>&1 \
  || [ src/sparkcdc/codec/_canaljson.c -nt "$stamp" ] || ! ls src/sparkcdc/codec/_canaljson*.so >/dev/null 2>&1; then
  [ "$have" = dev ] && { want=dev; spec='.[dev]'; }  # a rebuild keeps the dev extra it had
  echo "setup: pip install -e '$spec'"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e "$spec"
  echo "$want" >"$stamp"
fi
echo "setup ($level): ok ($(.venv/bin/python --version), $(java -version 2>&1 | head -1))"
