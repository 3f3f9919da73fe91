#!/usr/bin/env bash
# A local Spark standalone cluster (one master, two one-core workers, each worker with a private /tmp
# like a separate host) from the .venv's pyspark, on 127.0.0.1:
#
#   scripts/local-cluster.sh start    # prints the master URL and the web UI URL
#   scripts/local-cluster.sh status   # the alive workers
#   scripts/local-cluster.sh stop     # kills everything start started
#
# The processes run detached; their pids and ports are kept in ${SPARKCDC_CLUSTER_DIR:-.local-cluster}
# (relative to the repository), the logs in its logs/ directory. Workers are isolated only as root.
# Extra options go to the launcher, e.g. `start --workers 3 --memory 4g`.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 start|stop|status [--workers N] [--cores N] [--memory 2g]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  start | stop | status) ;;
  *) usage ;;
esac

PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  echo "no .venv: run scripts/setup.sh first" >&2
  exit 1
fi
exec "$PY" -m sparkcdc.services.spark_cluster "$cmd" --dir "${SPARKCDC_CLUSTER_DIR:-.local-cluster}" "$@"
