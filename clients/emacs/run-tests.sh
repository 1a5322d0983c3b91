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
"${EMACS:-emacs}" --batch -Q -L "$here" -l "$here/docsession-test.el" \
    -f ert-run-tests-batch-and-exit </dev/null
# The LSP mode with Emacs's own eglot (Debian's elpa-eglot, which scripts/bootstrap --tests installs),
# nothing of ours loaded: Debian's elpa packages are activated as its site-start would.
elpa=${DOCSESSION_ELPA:-/usr/share/emacs/site-lisp/elpa}
if [ ! -d "$elpa" ] || ! ls -d "$elpa"/eglot-* >/dev/null 2>&1; then
    echo "run-tests.sh: eglot is not installed under $elpa (apt-get install elpa-eglot, or scripts/bootstrap --tests)" >&2
    exit 2
fi
exec "${EMACS:-emacs}" --batch -Q \
    --eval "(progn (require 'package) (setq package-directory-list (list \"$elpa\")) (package-initialize))" \
    -l "$here/eglot-test.el" -f ert-run-tests-batch-and-exit </dev/null
