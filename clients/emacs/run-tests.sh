#!/bin/sh
# Run the ERT tests of docsession.el in batch Emacs.
# The server is $DOCSESSION_BIN, else <repo>/.build/debug/docsession.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
DOCSESSION_BIN=${DOCSESSION_BIN:-$repo/.build/debug/docsession}
export DOCSESSION_BIN
if [ ! -x "$DOCSESSION_BIN" ]; then
    echo "run-tests.sh: no server at $DOCSESSION_BIN (swift build, or set DOCSESSION_BIN)" >&2
    exit 2
fi
# stdin from /dev/null: a prompt fails at once instead of waiting.
exec "${EMACS:-emacs}" --batch -Q -L "$here" -l "$here/docsession-test.el" \
    -f ert-run-tests-batch-and-exit </dev/null
