-- Headless tests of the LSP mode (protocol/README.md §12) with Neovim's own LSP client and nothing of
-- ours loaded: the server is started by `vim.lsp.start_client`, Neovim's handlers apply
-- `workspace/applyEdit`, and the only other configuration is the answer `window/showMessageRequest`
-- gets (headless, there is nobody to pick one). Run by clients/neovim/run-tests.sh, with -u NONE and
-- without the plugin on the runtimepath.
local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2)
local root = vim.fn.fnamemodify(here, ':p:h:h:h:h')
local bin = os.getenv('DOCSESSION_BIN')
if not bin or bin == '' then bin = root .. '/.build/debug/docsession' end
local swapdir = vim.fn.tempname() .. '-swap'
vim.fn.mkdir(swapdir, 'p')
vim.o.directory = swapdir .. '//'
local failures, checks = 0, 0
local started = vim.loop.hrtime()

-- On a line of its own: Neovim prints the label of each workspace edit without a newline.
local function out(s) io.stdout:write('\n' .. s .. '\n') end
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
-- Another program rewrites the file in place, in one write (never empty in between).
local function rewrite(path, s)
  local f = assert(io.open(path, 'r+b')); f:write(s); f:close()
  if #s < #read_file(path) then vim.fn.system({ 'truncate', '-s', tostring(#s), path }) end
end
local function wait(cond, ms) return vim.wait(ms or 10000, cond, 10) end
local function text_of(buf) return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n') .. '\n' end

-- The configuration: the answers the user would pick, in order, and what was asked.
local answers, asked = {}, {}
vim.lsp.handlers['window/showMessageRequest'] = function(_, params)
  table.insert(asked, params)
  local choice = table.remove(answers, 1)
  for _, action in ipairs(params.actions or {}) do
    if action.title == choice then return action end
  end
  return vim.NIL
end
-- Neovim prints the label of every workspace edit; headless, a message may wait for a key.
vim.o.more = false
vim.o.shortmess = vim.o.shortmess .. 'F'

local function start(dir)
  local id = vim.lsp.start_client({
    name = 'docsession',
    cmd = { bin, 'serve', '--state-dir', dir .. '/state' },
    root_dir = dir,
  })
  assert(id, 'start_client failed')
  local client = vim.lsp.get_client_by_id(id)
  assert(wait(function() return client.initialized or (client.server_capabilities and next(client.server_capabilities) ~= nil) end),
    'initialize')
  return client
end

local function open(client, path)
  vim.cmd('silent edit ' .. vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(buf, client.id)
  return buf
end

-- A request answered in order after every notification sent before it (Neovim sends the changes
-- its debounce holds back before a request): once it is answered, the server has taken them.
local function barrier(client, buf, path)
  local result = client.request_sync('workspace/executeCommand',
    { command = 'docsession.versions', arguments = { vim.uri_from_fname(path) } }, 10000, buf)
  return result and result.err == nil
end

local function journal_holds(dir, text)
  for _, f in ipairs(vim.fn.glob(dir .. '/state/journal/*.journal', false, true)) do
    local s = read_file(f)
    if s and s:find(text, 1, true) then return true end
  end
  return false
end

-- A server started on `dir`, `path` opened, `line` typed (appended; the buffer's only line when
-- `replace`), and the server's journal holding it: the client and the buffer.
local function typed_and_journaled(dir, path, line, replace)
  local client = start(dir)
  local buf = open(client, path)
  api.nvim_buf_set_lines(buf, replace and 0 or -1, -1, false, { line })
  check(barrier(client, buf, path), 'the server took the change')
  check(wait(function() return journal_holds(dir, line) end), 'the journal holds the edit')
  return client, buf
end

-- kill -9 of the server; once Neovim has seen it die, the buffer goes without saving.
local function kill_server(client, buf)
  vim.loop.kill(client.rpc.pid, 9)
  check(wait(function() return vim.lsp.get_client_by_id(client.id) == nil end), 'Neovim saw the server die')
  -- Its handling of the death schedules work on the buffer (diagnostics reset): let it run first.
  local flushed = false
  vim.schedule(function() flushed = true end)
  wait(function() return flushed end)
  vim.bo[buf].modified = false
  vim.cmd('silent bwipeout! ' .. buf)
end

local cases = {}
local function case(name, f) table.insert(cases, { name = name, f = f }) end

local function fresh(content)
  local dir = vim.fn.tempname() .. '-docsession-lsp'
  vim.fn.mkdir(dir .. '/state', 'p')
  local path = dir .. '/notes.txt'
  write_file(path, content)
  return dir, path
end

case('initialize: the LSP capabilities', function()
  local dir = fresh('x\n')
  local client = start(dir)
  local caps = client.server_capabilities
  check(caps.textDocumentSync and caps.textDocumentSync.change == 2 and caps.textDocumentSync.openClose == true,
    'textDocumentSync incremental', vim.inspect(caps.textDocumentSync))
  check(caps.executeCommandProvider and vim.tbl_contains(caps.executeCommandProvider.commands, 'docsession.save'),
    'executeCommandProvider', vim.inspect(caps.executeCommandProvider))
  client.stop()
end)

case('typing reaches the server; the editor writes; another program rewrites the clean buffer', function()
  local dir, path = fresh('one\ntwo\n')
  local client = start(dir)
  local buf = open(client, path)
  api.nvim_buf_set_text(buf, 1, 3, 1, 3, { ' and a half' })
  api.nvim_buf_set_lines(buf, -1, -1, false, { 'three é😀' })
  -- Written at once: Neovim's didChange waits out its debounce (150 ms by default), so didSave
  -- reaches the server before the changes it wrote.
  vim.cmd('silent write')
  check(read_file(path) == 'one\ntwo and a half\nthree é😀\n', 'Neovim wrote the file', vim.inspect(read_file(path)))
  check(barrier(client, buf, path), 'the changes and didSave taken')
  -- The editor's own write is not another program's change: nothing is proposed or asked.
  rewrite(path, 'one\ntwo and a half\nthree é😀\nfour, from another program\n')
  check(wait(function() return text_of(buf) == read_file(path) end), 'the buffer took the file\'s text',
    vim.inspect(text_of(buf)))
  check(#asked == 0, 'nothing was asked', vim.inspect(asked))
  -- The reload left the buffer in sync: a second rewrite is a reload again, not a conflict.
  check(barrier(client, buf, path), 'the reload taken')
  rewrite(path, 'ONE\ntwo and a half\nthree é😀\nfour, from another program\n')
  check(wait(function() return text_of(buf) == read_file(path) end), 'the second rewrite reloaded too',
    vim.inspect(text_of(buf)))
  check(#asked == 0, 'still nothing asked', vim.inspect(asked))
  -- The server's save writes what the buffer holds.
  api.nvim_buf_set_lines(buf, -1, -1, false, { 'five' })
  local saved = client.request_sync('workspace/executeCommand',
    { command = 'docsession.save', arguments = { vim.uri_from_fname(path) } }, 10000, buf)
  check(saved and saved.err == nil and read_file(path) == text_of(buf), 'docsession.save wrote the buffer\'s text',
    vim.inspect(read_file(path)))
  vim.bo[buf].modified = false
  -- Wiped before the client stops: the buffer is closed (didClose) first.
  vim.cmd('silent bwipeout! ' .. buf)
  client.stop()
end)

case('a conflict merged through the message request', function()
  local dir, path = fresh('a\nb\nc\nd\ne\n')
  local client = start(dir)
  local buf = open(client, path)
  api.nvim_buf_set_lines(buf, 0, 1, false, { 'A, mine' })
  check(barrier(client, buf, path), 'the server took the change')
  answers = { 'Merge' }
  asked = {}
  rewrite(path, 'a\nb\nc\nd\nE, theirs\n')
  check(wait(function() return #asked == 1 end), 'the user was asked')
  check(asked[1] and asked[1].message:find('changed on disk', 1, true) ~= nil, 'about the change on disk',
    vim.inspect(asked[1]))
  check(wait(function() return text_of(buf) == 'A, mine\nb\nc\nd\nE, theirs\n' end), 'the buffer holds the merge',
    vim.inspect(text_of(buf)))
  vim.bo[buf].modified = false
  -- Wiped before the client stops: the buffer is closed (didClose) first.
  vim.cmd('silent bwipeout! ' .. buf)
  client.stop()
end)

case('kill -9 of the server during unsaved edits; the next open recovers them', function()
  local dir, path = fresh('saved line\n')
  kill_server(typed_and_journaled(dir, path, 'unsaved ✓'))
  check(read_file(path) == 'saved line\n', 'the file was not touched')

  answers = { 'Recover' }
  asked = {}
  local again = start(dir)
  local buf2 = open(again, path)
  check(wait(function() return #asked == 1 end), 'the user was asked')
  check(asked[1] and asked[1].message:find('recover unsaved edits', 1, true) ~= nil
    and vim.deep_equal(vim.tbl_map(function(a) return a.title end, asked[1].actions), { 'Recover', 'Discard', 'Not now' }),
    'to recover', vim.inspect(asked[1]))
  check(wait(function() return text_of(buf2) == 'saved line\nunsaved ✓\n' end), 'the buffer holds the recovered text',
    vim.inspect(text_of(buf2)))
  -- The buffer's own journal has it now, and nothing is offered any more.
  check(barrier(again, buf2, path), 'the server took the recovery')
  vim.cmd('silent write')
  check(read_file(path) == 'saved line\nunsaved ✓\n', 'written')
  vim.cmd('silent bwipeout! ' .. buf2)
  again.stop()
end)

case('a new file: typed, the server killed, recovered at the next open, then written', function()
  local dir = vim.fn.tempname() .. '-docsession-lsp'
  vim.fn.mkdir(dir .. '/state', 'p')
  local path = dir .. '/new.txt'
  kill_server(typed_and_journaled(dir, path, 'new ✓', true))
  check(read_file(path) == nil, 'no file was written')

  answers = { 'Recover' }
  asked = {}
  local again = start(dir)
  local buf2 = open(again, path)
  check(wait(function() return #asked == 1 end), 'the user was asked')
  check(asked[1] and asked[1].message:find('new.txt: recover unsaved edits', 1, true) ~= nil, 'to recover the new file',
    vim.inspect(asked[1]))
  check(wait(function() return text_of(buf2) == 'new ✓\n' end), 'the buffer holds the recovered text',
    vim.inspect(text_of(buf2)))
  check(barrier(again, buf2, path), 'the server took the recovery')
  vim.cmd('silent write')
  check(read_file(path) == 'new ✓\n', 'written', vim.inspect(read_file(path)))
  check(barrier(again, buf2, path), 'the server took the write')
  check(wait(function() return not journal_holds(dir, 'new ✓') end), 'the journal went with the write',
    vim.inspect(vim.fn.glob(dir .. '/state/journal/*', false, true)))
  check(#asked == 1, 'nothing else was asked', vim.inspect(asked))
  vim.cmd('silent bwipeout! ' .. buf2)
  again.stop()
end)

case('the client stopped (as at :qa!) drops the journal of the discarded edits', function()
  local dir, path = fresh('kept\n')
  local client, buf = typed_and_journaled(dir, path, 'discarded')
  -- What Neovim does for every client when it quits (VimLeavePre): shutdown, then exit.
  client.stop()
  check(wait(function() return vim.lsp.get_client_by_id(client.id) == nil end), 'the server stopped')
  check(not journal_holds(dir, 'discarded'), 'the journal went with the shutdown')
  vim.bo[buf].modified = false
  vim.cmd('silent bwipeout! ' .. buf)
end)

case('a version restored by the command', function()
  local dir, path = fresh('version one\n')
  local client = start(dir)
  local buf = open(client, path)
  local uri = vim.uri_from_fname(path)
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'version two' })
  vim.cmd('silent write')
  -- The save is kept as a version in the background: asked (polled) until it is there.
  local versions
  local deadline = vim.loop.hrtime() + 20e9  -- by the clock: a busy machine writes versions late
  repeat
    local answer = client.request_sync('workspace/executeCommand', { command = 'docsession.versions', arguments = { uri } }, 10000, buf)
    versions = answer and answer.result and answer.result.versions
    if versions and #versions >= 1 then break end
    vim.wait(20)  -- the poll's interval; the deadline above is the wait
  until vim.loop.hrtime() > deadline
  check(versions and #versions == 1, 'the saved version kept', vim.inspect(versions))
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'version three, unsaved' })
  local restored = client.request_sync('workspace/executeCommand',
    { command = 'docsession.restoreVersion', arguments = { uri, versions and versions[1].id } }, 10000, buf)
  check(restored and restored.result and restored.result.applied == true, 'restoreVersion applied', vim.inspect(restored))
  check(wait(function() return text_of(buf) == 'version two\n' end), 'the buffer holds the version', vim.inspect(text_of(buf)))
  vim.bo[buf].modified = false
  vim.cmd('silent bwipeout! ' .. buf)
  client.stop()
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
    out(('%s lsp: %s (%.0f ms)'):format(failures == before and 'ok  ' or 'FAIL', c.name, (vim.loop.hrtime() - t0) / 1e6))
  end
  vim.lsp.stop_client(vim.lsp.get_active_clients())
end, debug.traceback)
if not ok then
  failures = failures + 1
  out('ERROR ' .. tostring(err))
end
out(('lsp: %d cases, %d checks, %d failures, %.1f s'):format(#cases, checks, failures, (vim.loop.hrtime() - started) / 1e9))
if failures > 0 then vim.cmd('cquit 1') else vim.cmd('qa!') end
