#!/bin/sh
# Headless tests against the built server ($DOCSESSION_BIN, else <repo>/.build/debug/docsession):
# the Neovim plugin's (tests/run.lua), then the LSP mode's with Neovim's own LSP client and nothing
# of ours on the runtimepath (tests/lsp.lua). Exit status 0 when every check passes.
set -eu
cd "$(dirname "$0")/../.."
timeout 60 nvim --headless -u NONE -i NONE --cmd 'set rtp+=clients/neovim' -c 'luafile clients/neovim/tests/run.lua'
exec timeout 60 nvim --headless -u NONE -i NONE -c 'luafile clients/neovim/tests/lsp.lua'
