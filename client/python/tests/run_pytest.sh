#!/bin/sh
# Run pytest files of the Python package against the built extension (meson
# sets PYTHONPATH to it and MUSTER_TEST_MUSTERD to the daemon).  Exit 77
# (skipped) in a sanitizer build: the extension then needs the ASan runtime
# loaded before the interpreter, which Debian's python3 is not built with.
# Usage: run_pytest.sh PYTHON TEST_FILE...
py=$1
shift
case ${MUSTER_TEST_SANITIZE:-none} in
none | '') ;;
*)
    echo "built with -Db_sanitize=$MUSTER_TEST_SANITIZE: the extension cannot load into $py; skipped"
    exit 77
    ;;
esac
if ! "$py" -c 'import pytest' 2>/dev/null; then
    echo "no pytest under $py (apt-get install python3-pytest): skipped"
    exit 77
fi
exec "$py" -m pytest -p no:cacheprovider -q -rs "$@"
