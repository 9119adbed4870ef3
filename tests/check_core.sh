#!/bin/sh
# The state core (store-server/core/) stays off the event loop and the daemon: none of its files
# includes a libevent header, and none names a header of store-server/ outside core/ (the
# daemon's headers sit in its folders: base/, durable/, ..., and store-server/ itself), nor the
# generated wire header (the core answers with core/status.h's numbers).
# Usage: check_core.sh SOURCE_ROOT
root=${1:?usage: check_core.sh SOURCE_ROOT}
core=$root/store-server/core
bad=0
if grep -n '#include *<event2/\|#include *<event\.h>' "$core"/*.[ch]; then
    echo "core/ includes a libevent header" >&2
    bad=1
fi
if grep -n '#include *"muster\.pb-c\.h"' "$core"/*.[ch]; then
    echo "core/ includes the generated wire header" >&2
    bad=1
fi
for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$core"/*.[ch] | sort -u); do
    if [ ! -e "$core/$inc" ] && [ -n "$(find "$root/store-server" -path "$core" -prune -o -name "$(basename "$inc")" -print)" ]; then
        echo "core/ includes the daemon's $inc" >&2
        bad=1
    fi
done
exit $bad
