-- Headless tests of docsession.nvim against the built server. Run by clients/neovim/run-tests.sh.
local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2)
local root = vim.fn.fnamemodify(here, ':p:h:h:h:h')
local bin = os.getenv('DOCSESSION_BIN')
if not bin or bin == '' then bin = root .. '/.build/debug/docsession' end
local ds = require('docsession')
vim.cmd('runtime plugin/docsession.lua') -- -u NONE loads no plugins
local swapdir = vim.fn.tempname() .. '-swap'
vim.fn.mkdir(swapdir, 'p')
vim.o.directory = swapdir .. '//'
local failures, checks = 0, 0
local started = vim.loop.hrtime()

local function out(s) io.stdout:write(s .. '\n') end
local function check(cond, what, detail)
  checks = checks + 1
  if not cond then
    failures = failures + 1
    out('    FAIL ' .. what .. (detail and (': ' .. detail) or ''))
  end
  return cond
end

local function read_file(path)
  local f = io.open(path, 'rb'); if not f then return nil end
  local s = f:read('*a'); f:close(); return s
end
local function write_file(path, s) local f = assert(io.open(path, 'wb')); f:write(s); f:close() end
local function sh(cmd) vim.fn.system({ 'sh', '-c', cmd }); assert(vim.v.shell_error == 0, cmd) end

-- What the server should hold for the buffer: its lines joined with "\n", plus a final "\n" when
-- 'eol' is set; a buffer Neovim holds as empty is the empty text.
local function expected(buf)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  if #lines == 1 and lines[1] == '' and api.nvim_buf_call(buf, function() return vim.fn.wordcount().bytes end) == 0 then
    return ''
  end
  return table.concat(lines, '\n') .. (vim.bo[buf].eol and '\n' or '')
end

local function server_text(buf)
  assert(ds.sync(buf), 'sync timed out')
  local err, res = ds.call(buf, 'document/read')
  assert(not err, err and err.message)
  return res.text, res.version
end

local function step(buf, what, f)
  if f then f() end
  local text = server_text(buf)
  local want = expected(buf)
  check(text == want, what, ('server %s, buffer %s'):format(vim.inspect(text), vim.inspect(want)))
end

local function wait(cond, ms) return vim.wait(ms or 4000, cond, 10) end

local cases = {}
local function case(name, f) table.insert(cases, { name = name, f = f }) end

local function fresh(name, content)
  local dir = vim.fn.tempname() .. '-docsession-nvim'
  vim.fn.mkdir(dir .. '/state', 'p')
  ds.shutdown()
  ds.setup({ cmd = { bin, '--stdio', '--state-dir', dir .. '/state' }, timeout = 5000,
    log_file = os.getenv('DOCSESSION_NVIM_LOG') })
  local path = dir .. '/' .. name
  write_file(path, content)
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  assert(ds.attach(buf), 'attach failed')
  return buf, path, dir
end

case('edits with non-ASCII text reach the server exactly', function()
  local buf = fresh('unicode.txt', 'héllo wörld\n😀 emoji line\n漢字 CJK テキスト\nlast\n')
  check(server_text(buf) == expected(buf), 'attach: texts agree')
  step(buf, 'insert after é', function() api.nvim_buf_set_text(buf, 0, 3, 0, 3, { 'X' }) end)
  step(buf, 'replace the emoji', function() api.nvim_buf_set_text(buf, 1, 0, 1, 4, { '😁' }) end)
  step(buf, 'insert between two CJK characters', function() api.nvim_buf_set_text(buf, 2, 3, 2, 3, { 'é😀' }) end)
  step(buf, 'replace across lines', function() api.nvim_buf_set_text(buf, 0, 6, 2, 9, { 'A', 'B😀' }) end)
  step(buf, 'insert line breaks', function() api.nvim_buf_set_text(buf, 0, 3, 0, 3, { '', '', '' }) end)
  step(buf, 'set_lines: insert lines', function() api.nvim_buf_set_lines(buf, 1, 1, false, { 'new 1 ✓', 'new 2 字' }) end)
  step(buf, 'set_lines: replace lines', function() api.nvim_buf_set_lines(buf, 0, 2, false, { 'replaced é' }) end)
  step(buf, 'set_lines: delete lines', function() api.nvim_buf_set_lines(buf, 1, 3, false, {}) end)
  step(buf, 'set_lines: append at the end', function() api.nvim_buf_set_lines(buf, -1, -1, false, { 'end 😀' }) end)
  step(buf, 'set_text: delete the final line break', function()
    local n = api.nvim_buf_line_count(buf)
    local prev = api.nvim_buf_get_lines(buf, n - 2, n - 1, true)[1]
    api.nvim_buf_set_text(buf, n - 2, #prev, n - 1, 0, { '' })
  end)
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'héllo wörld', '😀 emoji line', '漢字 CJK テキスト', 'last' })
  step(buf, 'normal: A', function() vim.cmd('normal! ggA ✓') end)
  step(buf, 'normal: x before é', function() vim.cmd('normal! gg0x') end)
  step(buf, 'normal: x on é', function() vim.cmd('normal! gg0x') end)
  step(buf, 'normal: r on the emoji', function() vim.cmd('normal! 2gg0rE') end)
  step(buf, 'normal: cw over CJK', function() vim.cmd('normal! 3gg0cw字字') end)
  step(buf, 'normal: dd', function() vim.cmd('normal! 2Gdd') end)
  step(buf, 'normal: yyP', function() vim.cmd('normal! ggyyP') end)
  step(buf, 'normal: J', function() vim.cmd('normal! ggJ') end)
  step(buf, 'normal: o', function() vim.cmd('normal! Go新しい行') end)
  step(buf, 'normal: ~ over multi-byte', function() vim.cmd('normal! gg0~~~~') end)
  step(buf, 'normal: >>', function() vim.cmd('normal! gg>>') end)
  step(buf, 'undo', function() vim.cmd('undo') end)
  step(buf, 'undo twice more', function() vim.cmd('undo') vim.cmd('undo') end)
  step(buf, 'redo', function() vim.cmd('redo') end)
  step(buf, ':s inserting line breaks', function() vim.cmd([[silent %s/l/L\r/g]]) end)
  step(buf, ':s joining lines', function() vim.cmd([[silent %s/\n//]]) end)
  step(buf, 'undo of the joins', function() vim.cmd('undo') end)
  step(buf, ':g/d', function() vim.cmd('silent g/L/d') end)
  step(buf, 'visual block insert', function()
    api.nvim_buf_set_lines(buf, 0, -1, false, { 'aé', 'b😀', 'c字' })
    vim.cmd(api.nvim_replace_termcodes('normal! gg0l<C-v>jjI·', true, false, true))
  end)
  step(buf, ':sort', function() vim.cmd('sort!') end)
  step(buf, 'ggdG: the buffer empty', function() vim.cmd('normal! ggdG') end)
  step(buf, 'typing into the empty buffer', function() vim.cmd('normal! iabc é') end)
  step(buf, 'set_lines: everything away', function() api.nvim_buf_set_lines(buf, 0, -1, false, {}) end)
  step(buf, 'set_lines into the empty buffer', function() api.nvim_buf_set_lines(buf, 0, -1, false, { 'x', 'ÿ' }) end)
  local doc = ds.get(buf)
  out(('    (%d fallbacks to a whole-text diff, %d resyncs)'):format(doc.fallbacks, doc.resyncs))
end)

case(':write saves through the server; a file without a final newline keeps it so', function()
  local buf, path = fresh('noeol.txt', 'one é\ntwo 😀')
  check(vim.bo[buf].eol == false and vim.bo[buf].fixeol == false, "'noeol' 'nofixeol' set for the file without a final line break")
  check(server_text(buf) == 'one é\ntwo 😀', 'attach: no final newline')
  step(buf, 'append a line (noeol)', function() api.nvim_buf_set_lines(buf, -1, -1, false, { 'three' }) end)
  step(buf, 'normal: o at the end (noeol)', function() vim.cmd('normal! Gofour') end)
  step(buf, 'normal: dd of the last line (noeol)', function() vim.cmd('normal! Gdd') end)
  step(buf, 'set_text at the very end (noeol)', function() api.nvim_buf_set_text(buf, 2, 5, 2, 5, { '!', 'x' }) end)
  check(vim.bo[buf].modified, "'modified' before :write")
  vim.cmd('write')
  check(read_file(path) == 'one é\ntwo 😀\nthree!\nx', ':write wrote the text (no final newline)', vim.inspect(read_file(path)))
  check(not vim.bo[buf].modified, "'modified' off after :write")
  local st = vim.b[buf].docsession_state
  check(st.reason == 'saved' and st.hasUnsavedChanges == false, 'b:docsession_state says saved', vim.inspect(st))
  vim.bo[buf].fixeol = true
  vim.cmd('write')
  check(read_file(path) == 'one é\ntwo 😀\nthree!\nx\n', "with 'fixeol' set again, :write adds the final newline", vim.inspect(read_file(path)))
  check(server_text(buf) == 'one é\ntwo 😀\nthree!\nx\n', 'the server has the final newline too')
  step(buf, 'an edit after the switch to eol', function() api.nvim_buf_set_lines(buf, -1, -1, false, { 'y' }) end)
  vim.cmd('write')
  check(read_file(path) == 'one é\ntwo 😀\nthree!\nx\ny\n', 'third :write', vim.inspect(read_file(path)))
end)

case('an empty file takes a final newline, as Neovim writes it', function()
  local buf, path = fresh('empty.txt', '')
  check(server_text(buf) == '', 'attach: empty')
  step(buf, 'typing into the empty file', function() vim.cmd('normal! ihello 世界') end)
  check(server_text(buf) == 'hello 世界\n', 'the text has the final newline')
  vim.cmd('write')
  check(read_file(path) == 'hello 世界\n', ':write', vim.inspect(read_file(path)))
end)

case('an external change reaches the buffer; an external mv renames it', function()
  local buf, path, dir = fresh('watched.txt', 'alpha\nbéta\ngamma 😀\n')
  local v0 = ds.get(buf).version
  sh(("printf 'alpha\\nbéta changed\\ngamma 😀\\ndelta\\n' > '%s'"):format(path))
  check(wait(function() return ds.get(buf).version > v0 end), 'didChange arrived')
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'alpha', 'béta changed', 'gamma 😀', 'delta' }),
    'the buffer took the new text', vim.inspect(api.nvim_buf_get_lines(buf, 0, -1, false)))
  check(not vim.bo[buf].modified, "'modified' stays off after a reload")
  check(ds.get(buf).remote_fallbacks == 0, 'the edits applied one by one with nvim_buf_set_text')
  check(server_text(buf) == expected(buf), 'no echo: the server and the buffer agree')
  local _, version = server_text(buf)
  check(version == ds.get(buf).version, 'the reload was not echoed back as an edit', ('%d vs %d'):format(version, ds.get(buf).version))
  step(buf, 'an edit after the reload', function() api.nvim_buf_set_text(buf, 3, 5, 3, 5, { ' é' }) end)
  vim.cmd('write')
  local moved = dir .. '/renamed.md'
  sh(("mv '%s' '%s'"):format(path, moved))
  check(wait(function() return api.nvim_buf_get_name(buf) == moved end), 'the buffer follows the move',
    api.nvim_buf_get_name(buf))
  check(vim.b[buf].docsession_state.uri == vim.uri_from_fname(moved), 'b:docsession_state has the new uri')
  check(vim.fn.swapname(buf):find('renamed.md.swp', 1, true) ~= nil, 'the swap file was renamed with it (:file)', vim.fn.swapname(buf))
  step(buf, 'an edit after the move', function() api.nvim_buf_set_lines(buf, 0, 0, false, { '# title' }) end)
  vim.cmd('write')
  check(read_file(moved) == expected(buf), ':write after the move writes the new file', vim.inspect(read_file(moved)))
  check(read_file(path) == nil, 'nothing at the old name')
end)

case('a conflict shows in b:docsession_state; :w! overwrites', function()
  local buf, path = fresh('conflict.txt', 'mine é\n')
  step(buf, 'an unsaved edit', function() api.nvim_buf_set_text(buf, 0, 0, 0, 0, { '>> ' }) end)
  sh(("printf 'theirs 😀\\n' > '%s'"):format(path))
  check(wait(function()
    local st = vim.b[buf].docsession_state
    return st and vim.tbl_contains(st.flags or {}, 'inConflict')
  end), 'inConflict in b:docsession_state', vim.inspect(vim.b[buf].docsession_state))
  check(ds.status(buf):find('inConflict', 1, true) ~= nil, 'status() shows it', ds.status(buf))
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { '>> mine é' }), 'the buffer keeps its text')
  vim.cmd('silent! write')
  check(read_file(path) == 'theirs 😀\n', ':write (no !) refused: the file is theirs', vim.inspect(read_file(path)))
  check(vim.bo[buf].modified, "'modified' stays on")
  vim.cmd('write!')
  check(read_file(path) == '>> mine é\n', ':write! overwrote', vim.inspect(read_file(path)))
  check(not vim.tbl_contains(vim.b[buf].docsession_state.flags, 'inConflict'), 'the conflict is over')
end)

case('a stale version resyncs; detaching and unloading close the document', function()
  local buf = fresh('stale.txt', 'one\ntwo\n')
  local doc = ds.get(buf)
  -- Another edit behind the plugin's back moves the server's version on.
  local err = ds.request('document/edit', { document = doc.handle, version = doc.version,
    edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } }, text = 'zero\n' } } })
  check(not err, 'the foreign edit applied')
  step(buf, 'an edit against the stale version', function() api.nvim_buf_set_text(buf, 1, 3, 1, 3, { ' é' }) end)
  check(doc.resyncs == 1, 'one resync', tostring(doc.resyncs))
  check(server_text(buf) == 'one\ntwo é\n', 'the buffer won')
  vim.cmd('DocSessionDetach')
  check(ds.get(buf) == nil, 'detached')
  local e2 = ds.request('document/state', { document = doc.handle })
  check(e2 and e2.code == -32011, 'the server closed the document', vim.inspect(e2))
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'not sent' })
  vim.cmd('DocSessionAttach')
  local doc2 = ds.get(buf)
  check(doc2 and doc2.handle ~= doc.handle, 'attached again with a new handle')
  check(server_text(buf) == 'not sent\n', 'the modified buffer\'s text went to the server on attach')
  vim.cmd('bwipeout!')
  local e3 = ds.request('document/state', { document = doc2.handle })
  check(e3 and e3.code == -32011, ':bwipeout closed the document', vim.inspect(e3))
end)

-- Recovery of a dead server's unsaved changes ------------------------------------------------------

local function journals(dir) return vim.fn.glob(dir .. '/state/journal/*.journal', false, true) end
local function journal_size(dir)
  local n = 0
  for _, f in ipairs(journals(dir)) do n = n + math.max(vim.fn.getfsize(f), 0) end
  return n
end
local function journal_holds(dir, text)
  for _, f in ipairs(journals(dir)) do
    local s = read_file(f)
    if s and s:find(text, 1, true) then return true end
  end
  return false
end

-- Make an edit that inserts text, and wait until the server's journal holds it: the journals grow
-- once the server's writer has written the change (at most flushDelay after it).
local function edit_and_journal(buf, dir, edit, text)
  local before = journal_size(dir)
  edit()
  assert(ds.sync(buf), 'sync timed out')
  return check(wait(function() return journal_size(dir) > before and journal_holds(dir, text) end, 5000),
    'the journal holds ' .. vim.inspect(text))
end

-- SIGKILL the server (nothing is flushed on the way out), and wipe the buffer.
local function crash(buf)
  local pid = ds._server_pid()
  -- The plugin's error message about the server's death would make the next redraw wait (headless).
  ds._shutting_down = true
  vim.loop.kill(pid, 9)
  check(wait(function() return ds.get(buf) == nil end), 'the plugin saw the server die')
  vim.cmd('silent bwipeout! ' .. buf)
end

-- Visit the file again with a new server on the same state directory, recovery set to action.
local function revisit(dir, path, action)
  ds.setup({ cmd = { bin, '--stdio', '--state-dir', dir .. '/state' }, timeout = 5000,
    log_file = os.getenv('DOCSESSION_NVIM_LOG'), recovery = action })
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  assert(ds.attach(buf), 'attach failed')
  return buf
end

local original = 'héllo wörld\n😀 second\nthird\n'

local function crash_with_two_edits(name)
  local buf, path, dir = fresh(name, original)
  edit_and_journal(buf, dir, function() api.nvim_buf_set_text(buf, 0, 0, 0, 0, { 'Recovered 😀 ' }) end, 'Recovered 😀 ')
  edit_and_journal(buf, dir, function() api.nvim_buf_set_lines(buf, -1, -1, false, { 'last ✓' }) end, 'last ✓')
  check(ds.get(buf).version == 3, 'two edits: version 3')
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  crash(buf)
  return path, dir, lines
end

case('recovery after a crash: listed, offered, recovered; server undo gives the file back', function()
  local path, dir, lines = crash_with_two_edits('recover.txt')
  check(read_file(path) == original, 'the file was not touched')
  local list = ds.recoverable() -- starts a new server on the same state directory
  check(list and #list == 1 and list[1].uri == vim.uri_from_fname(path) and list[1].edits == 2
    and list[1].open == false, 'workspace/recoverable lists the journal', vim.inspect(list))
  vim.cmd('DocSessionRecoverable')
  local qf = vim.fn.getqflist()
  check(#qf == 1 and vim.fn.bufname(qf[1].bufnr) == path and qf[1].text:find('2 edits', 1, true) ~= nil,
    ':DocSessionRecoverable fills the quickfix list', vim.inspect(qf))
  vim.cmd('cclose')
  local buf = revisit(dir, path, 'recover')
  local doc = ds.get(buf)
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), lines), 'the buffer holds the edited text',
    vim.inspect(api.nvim_buf_get_lines(buf, 0, -1, false)))
  check(vim.bo[buf].modified, "'modified' on")
  check(doc.version == 3 and doc.recovery == nil, 'version 3, no offer left', tostring(doc.version))
  check(server_text(buf) == expected(buf), 'the server and the buffer agree')
  check(ds.status(buf) == '[ds:' .. doc.handle .. ' v3 +]', 'status', ds.status(buf))
  step(buf, 'an edit after the recovery', function() api.nvim_buf_set_text(buf, 1, 0, 1, 0, { 'é' }) end)
  step(buf, 'and back', function() api.nvim_buf_set_text(buf, 1, 0, 1, 2, { '' }) end)
  -- Undo through the server, step by step, down to the file's text.
  for _ = 1, 10 do
    local _, st = ds.call(buf, 'document/state')
    if not st.canUndo then break end
    local err = ds.call(buf, 'document/undo')
    check(not err, 'document/undo', err and err.message)
  end
  local _, read = ds.call(buf, 'document/read')
  check(read.text == original, 'undo through the server gives the file\'s text back', vim.inspect(read.text))
  local _, st = ds.call(buf, 'document/state')
  check(st.hasUnsavedChanges == false, 'no unsaved changes at the bottom of the undo history')
  check(wait(function() return journal_size(dir) == 0 end), 'the journal went with the unsaved changes')
  vim.cmd('bwipeout!')
end)

case('recovery discarded: the file\'s text stays, nothing is offered again', function()
  local path, dir = crash_with_two_edits('discard.txt')
  local buf = revisit(dir, path, 'discard')
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'héllo wörld', '😀 second', 'third' }),
    'the buffer holds the file\'s text')
  check(not vim.bo[buf].modified, "'modified' off")
  check(ds.get(buf).recovery == nil, 'no offer left')
  check(server_text(buf) == original, 'the server holds the file\'s text')
  check(journal_size(dir) == 0 and #journals(dir) == 0, 'the journal was deleted')
  check(#ds.recoverable() == 0, 'nothing to recover')
  vim.cmd('DocSessionDetach')
  vim.cmd('DocSessionAttach')
  check(ds.get(buf) and ds.get(buf).recovery == nil, 'attached again: no offer')
  ds.shutdown()
  buf = revisit(dir, path, 'recover')
  check(ds.get(buf).recovery == nil and server_text(buf) == original, 'a new server: no offer')
end)

case('a file changed after the crash: asked, the offer waits; recovering gives a conflict', function()
  local buf, path, dir = fresh('conflict-recover.txt', 'alpha\nbeta\n')
  edit_and_journal(buf, dir, function() api.nvim_buf_set_text(buf, 0, 0, 0, 0, { 'mine ' }) end, 'mine ')
  crash(buf)
  write_file(path, 'alpha\nbeta, theirs\n')
  local asked
  local confirm = vim.fn.confirm
  vim.fn.confirm = function(msg) asked = msg; return 3 end -- "Later"
  local ok, res = pcall(revisit, dir, path, 'ask')
  vim.fn.confirm = confirm
  assert(ok, res)
  buf = res
  check(asked and asked:find(', 1 edit)', 1, true) and asked:find('the file changed since', 1, true),
    'the question tells the date, the edits and the change on disk', asked)
  local doc = ds.get(buf)
  check(type(doc.recovery) == 'table' and doc.recovery.fileMatchesBase == false, 'the offer waits', vim.inspect(doc.recovery))
  check(ds.status(buf):find('recoverable', 1, true) ~= nil, 'status() shows it', ds.status(buf))
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'alpha', 'beta, theirs' }), 'the buffer holds the file\'s text')
  local list = ds.recoverable()
  check(#list == 1 and list[1].open == true, 'listed as open', vim.inspect(list))
  vim.cmd('DocSessionRecover')
  check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'mine alpha', 'beta' }), 'the buffer holds the recovered text',
    vim.inspect(api.nvim_buf_get_lines(buf, 0, -1, false)))
  check(wait(function() return vim.tbl_contains(vim.b[buf].docsession_state.flags or {}, 'inConflict') end),
    'in conflict', vim.inspect(vim.b[buf].docsession_state))
  check(server_text(buf) == expected(buf), 'the server and the buffer agree')
  vim.cmd('write!')
  check(read_file(path) == 'mine alpha\nbeta\n', ':write! writes the recovered text', vim.inspect(read_file(path)))
  check(not vim.bo[buf].modified, "'modified' off")
end)

case('unsaved changes in another running server: a warning, no offer', function()
  local buf, path, dir = fresh('elsewhere.txt', 'one\n')
  vim.cmd('DocSessionDetach')
  local other = vim.lsp.rpc.start(bin, { '--stdio', '--state-dir', dir .. '/state' }, {})
  local function req(method, params)
    local done, e, r = false, nil, nil
    other.request(method, params, function(err, res) done, e, r = true, err, res end)
    assert(wait(function() return done end), method .. ' timed out')
    assert(not e, vim.inspect(e))
    return r
  end
  req('initialize', { capabilities = vim.empty_dict() })
  other.notify('initialized', vim.empty_dict())
  local opened = req('document/open', { uri = vim.uri_from_fname(path) })
  local before = journal_size(dir)
  req('document/edit', { document = opened.document, version = 1, edits = { { text = 'theirs\n' } } })
  check(wait(function() return journal_size(dir) > before and journal_holds(dir, 'theirs\n') end, 5000),
    'the other server journaled its edit')
  ds.setup({ cmd = { bin, '--stdio', '--state-dir', dir .. '/state' }, timeout = 5000, recovery = 'recover' })
  local doc = ds.attach(buf)
  check(doc and doc.edited_elsewhere == true and doc.recovery == nil, 'editedElsewhere, no offer')
  check(server_text(buf) == 'one\n', 'the file\'s text')
  vim.loop.kill(other.pid, 15)
end)

-- Sync tools' conflict copies --------------------------------------------------------------------

local syncthing_copy = 'notes.sync-conflict-20261128-101502-ABCDEFG.txt'
local nextcloud_copy = 'notes (conflicted copy 2026-11-28 093000).txt'

-- Run f with vim.notify recording the messages into the list notes.
local function with_notes(f)
  local notes = {}
  local notify = vim.notify
  vim.notify = function(msg) table.insert(notes, msg) end
  local ok, res = xpcall(function() return f(notes) end, debug.traceback)
  vim.notify = notify
  assert(ok, res)
  return res
end

local function noted(notes, s)
  for _, m in ipairs(notes) do
    if m:find(s, 1, true) then return m end
  end
  return nil
end

case('a conflict copy beside unsaved edits: status, message; theirs takes it', function()
  with_notes(function(notes)
    local buf, path, dir = fresh('notes.txt', 'Hello, world!\nSecond line\n')
    step(buf, 'an unsaved edit', function() api.nvim_buf_set_text(buf, 0, 0, 0, 0, { 'Howdy ' }) end)
    local copy = dir .. '/' .. syncthing_copy
    write_file(copy, 'Hello from the laptop 😀\n')
    check(wait(function() return #(ds.get(buf).copies or {}) == 1 end), 'the copy is listed')
    local doc = ds.get(buf)
    check(ds.status(buf) == '[ds:' .. doc.handle .. ' v' .. doc.version .. ' + copies:1]', 'status() shows copies:1',
      ds.status(buf))
    check(doc.copies[1].tool == 'syncthing' and doc.copies[1].device == 'ABCDEFG', 'tool and device',
      vim.inspect(doc.copies[1]))
    check(noted(notes, 'docsession: notes.txt has a conflict copy from syncthing (device ABCDEFG, 2026-11-28 10:15): '
      .. ':DocSessionResolveSync') ~= nil, 'the message names the tool, the device and the date', vim.inspect(notes))
    check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'Howdy Hello, world!', 'Second line' }),
      'the buffer keeps its text')
    local res = ds.resolve_sync(buf, 'theirs', 'sync:' .. syncthing_copy)
    check(res and res.resolved == true, 'resolved', vim.inspect(res))
    check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'Hello from the laptop 😀' }),
      'the buffer holds the copy\'s text', vim.inspect(api.nvim_buf_get_lines(buf, 0, -1, false)))
    check(server_text(buf) == expected(buf), 'the server and the buffer agree')
    check(read_file(copy) == nil, 'the copy is gone from disk')
    check(wait(function() return not doc.refresh_pending end), 'the refresh after conflictResolved ran')
    check(#doc.copies == 0, 'no copies left')
    check(ds.status(buf) == '[ds:' .. doc.handle .. ' v' .. doc.version .. ' +]', 'status() back to normal',
      ds.status(buf))
    check(vim.bo[buf].modified, "'modified': the copy's text is unsaved")
    vim.cmd('write')
    check(read_file(path) == 'Hello from the laptop 😀\n', ':write writes it', vim.inspect(read_file(path)))
    check(not vim.bo[buf].modified, "'modified' off")
  end)
end)

case('a copy there before the attach shows at once; :write goes through while it waits', function()
  with_notes(function(notes)
    local buf, path, dir = fresh('notes.txt', 'alpha\nbeta\n')
    -- Detached, the copy appears; then the file is opened again.
    vim.cmd('DocSessionDetach')
    local copy = dir .. '/' .. syncthing_copy
    write_file(copy, 'alpha\nbeta, laptop\n')
    local doc = ds.attach(buf)
    check(doc and #(doc.copies or {}) == 1, 'listed at the attach', vim.inspect(doc and doc.copies))
    check(ds.status(buf):find(' copies:1]', 1, true) ~= nil, 'status() shows it at once', ds.status(buf))
    check(noted(notes, 'notes.txt has a conflict copy from syncthing (device ABCDEFG, 2026-11-28 10:15)') ~= nil,
      'the message', vim.inspect(notes))
    local sbuf = ds.show_copy(buf)
    check(sbuf and vim.deep_equal(api.nvim_buf_get_lines(sbuf, 0, -1, false), { 'alpha', 'beta, laptop' }),
      'show_copy: the copy\'s text in a scratch buffer', sbuf and vim.inspect(api.nvim_buf_get_lines(sbuf, 0, -1, false)))
    check(sbuf and not vim.bo[sbuf].modifiable, 'read-only')
    check(api.nvim_get_current_buf() == buf, 'the cursor stays in the document\'s window')
    vim.cmd('only')
    step(buf, 'an edit', function() api.nvim_buf_set_lines(buf, -1, -1, false, { 'gamma' }) end)
    vim.cmd('write')
    check(read_file(path) == 'alpha\nbeta\ngamma\n', ':write wrote (no !) while the copy waits', vim.inspect(read_file(path)))
    check(not vim.bo[buf].modified, "'modified' off")
    check(read_file(copy) ~= nil, 'the copy is still there')
    check(ds.status(buf):find(' copies:1]', 1, true) ~= nil, 'and still shown', ds.status(buf))
    -- The tool removes it (no resolution): status() is back to normal.
    os.remove(copy)
    check(wait(function() return ds.status(buf) == '[ds:' .. doc.handle .. ' v' .. doc.version .. ']'
      and not doc.refresh_pending and #doc.copies == 0 end), 'the copy removed: status() back', ds.status(buf))
  end)
end)

case('two copies: a merge with regions changes nothing; resolving one leaves the other', function()
  with_notes(function(notes)
    local buf, _, dir = fresh('notes.txt', 'alpha\nbeta\ngamma\n')
    step(buf, 'an unsaved edit', function() api.nvim_buf_set_text(buf, 0, 0, 0, 5, { 'ALPHA' }) end)
    local first, second = dir .. '/' .. syncthing_copy, dir .. '/' .. nextcloud_copy
    write_file(first, 'alpha, laptop\nbeta\ngamma\n')
    check(wait(function() return #(ds.get(buf).copies or {}) == 1 end), 'the first copy is listed')
    write_file(second, 'alpha\nbeta\ngamma, phone\n')
    check(wait(function() return #(ds.get(buf).copies or {}) == 2 end), 'the second copy is listed')
    check(ds.status(buf):find(' copies:2]', 1, true) ~= nil, 'status() shows copies:2', ds.status(buf))
    check(noted(notes, 'has a conflict copy from nextcloud (2026-11-28 09:30)') ~= nil, 'the second message (no device)',
      vim.inspect(notes))
    -- The merge of the Syncthing copy overlaps the buffer's edit.
    local res = ds.resolve_sync(buf, 'merge', 'sync:' .. syncthing_copy)
    check(res and res.resolved == false and #res.conflicts == 1, 'the merge answers a region', vim.inspect(res))
    check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'ALPHA', 'beta', 'gamma' }), 'nothing changed')
    local lines = res and res.regions_buffer and api.nvim_buf_get_lines(res.regions_buffer, 0, -1, false) or {}
    check(vim.tbl_contains(lines, 'alpha, laptop') and vim.tbl_contains(lines, 'ALPHA'), 'the regions are shown',
      vim.inspect(lines))
    vim.cmd('only')
    -- :DocSessionResolveSync mine, the copy picked among the two.
    local items
    local select = vim.ui.select
    vim.ui.select = function(list, opts, on_choice)
      items = {}
      for _, c in ipairs(list) do table.insert(items, opts.format_item(c)) end
      for _, c in ipairs(list) do
        if c.tool == 'syncthing' then return on_choice(c) end
      end
    end
    local ok, e = pcall(vim.cmd, 'DocSessionResolveSync mine')
    vim.ui.select = select
    check(ok, ':DocSessionResolveSync mine', e)
    check(items and vim.tbl_contains(items, syncthing_copy .. ': syncthing (device ABCDEFG, 2026-11-28 10:15)')
      and vim.tbl_contains(items, nextcloud_copy .. ': nextcloud (2026-11-28 09:30)'),
      'the choice shows tool, device and date', vim.inspect(items))
    check(read_file(first) == nil and read_file(second) ~= nil, 'the first copy is gone, the second stays')
    check(wait(function() return not ds.get(buf).refresh_pending end), 'refreshed')
    local doc = ds.get(buf)
    check(#doc.copies == 1 and doc.copies[1].tool == 'nextcloud', 'the other copy is still listed', vim.inspect(doc.copies))
    check(ds.status(buf):find(' copies:1]', 1, true) ~= nil, 'status() shows copies:1', ds.status(buf))
    res = ds.resolve_sync(buf, 'merge')
    check(res and res.resolved == true, 'the only copy left merges', vim.inspect(res))
    check(vim.deep_equal(api.nvim_buf_get_lines(buf, 0, -1, false), { 'ALPHA', 'beta', 'gamma, phone' }),
      'both changes', vim.inspect(api.nvim_buf_get_lines(buf, 0, -1, false)))
    check(server_text(buf) == expected(buf), 'the server and the buffer agree')
    check(read_file(second) == nil, 'the second copy is gone')
    check(ds.status(buf) == '[ds:' .. doc.handle .. ' v' .. doc.version .. ' +]', 'status() back to normal', ds.status(buf))
  end)
end)

local ok, err = xpcall(function()
  for _, c in ipairs(cases) do
    local before = failures
    local t0 = vim.loop.hrtime()
    local cok, cerr = xpcall(c.f, debug.traceback)
    if not cok then
      failures = failures + 1
      out('    ERROR ' .. tostring(cerr))
    end
    out(('%s %s (%.0f ms)'):format(failures == before and 'ok  ' or 'FAIL', c.name, (vim.loop.hrtime() - t0) / 1e6))
  end
  ds.shutdown()
end, debug.traceback)
if not ok then
  failures = failures + 1
  out('ERROR ' .. tostring(err))
end
out(('%d cases, %d checks, %d failures, %.1f s'):format(#cases, checks, failures, (vim.loop.hrtime() - started) / 1e9))
if failures > 0 then vim.cmd('cquit 1') else vim.cmd('qa!') end
