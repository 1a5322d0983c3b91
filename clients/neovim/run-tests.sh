#!/bin/sh
# Headless tests of the Neovim plugin against the built server ($DOCSESSION_BIN, else
# <repo>/.build/debug/docsession). Exit status 0 when every check passes.
set -eu
cd "$(dirname "$0")/../.."
exec timeout 60 nvim --headless -u NONE -i NONE --cmd 'set rtp+=clients/neovim' -c 'luafile clients/neovim/tests/run.lua'
