# Shared by the shell tests (sourced): one line per check, and the wait for a daemon's port file.

fail=0

# check DESCRIPTION COMMAND...: run COMMAND, print "ok   DESCRIPTION" or "FAIL DESCRIPTION", count failures in $fail.
check() {
    local what=$1
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=$((fail + 1)); fi
}

# await_file FILE [SECONDS]: wait up to SECONDS (default 10) for FILE to be non-empty; 0 once it is.
await_file() {
    local i
    for ((i = 0; i < ${2:-10} * 10; i++)); do
        [ -s "$1" ] && return 0
        sleep 0.1
    done
    [ -s "$1" ]
}

# scratch: make $tmp, a directory removed at exit, after stopping the daemon whose pid is in $pid (if set).
scratch() {
    tmp=$(mktemp -d)
    pid=
    trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
}
