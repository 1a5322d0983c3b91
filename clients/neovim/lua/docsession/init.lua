-- docsession.nvim: Neovim 0.7+ buffers backed by a docsession server (JSON-RPC 2.0 over stdio,
-- LSP framing, through vim.lsp.rpc). See clients/neovim/README.md.
local api = vim.api
local M = {}

local config = {
  cmd = { 'docsession', '--stdio' },
  timeout = 10000, -- ms for the requests Neovim waits on (initialize, open, save, close, shutdown)
  log_file = nil, -- a path: every message sent and received is appended to it
  -- What to do when a file is attached whose unsaved changes a server that ended left (the
  -- `recovery` of document/open): 'ask', 'recover', 'discard' or 'ignore' (the offer waits:
  -- :DocSessionRecover, :DocSessionDiscardRecovery).
  recovery = 'ask',
}

local client = nil -- { rpc = ..., capabilities = ... }
local docs = {} -- bufnr -> doc
local by_handle = {} -- handle -> bufnr

-- Logging -------------------------------------------------------------------------------------

local function log(dir, payload)
  if not config.log_file then return end
  local f = io.open(config.log_file, 'a')
  if f then
    f:write(dir, ' ', (vim.json.encode(payload):gsub('\\/', '/')), '\n')
    f:close()
  end
end

local function warn(msg, level)
  vim.notify('docsession: ' .. msg, level or vim.log.levels.WARN)
end

-- The server ----------------------------------------------------------------------------------

local on_notification -- defined below

local function request(method, params, cb)
  if not client then
    cb({ code = -1, message = 'the docsession server is not running' })
    return
  end
  local id
  local ok, n = client.rpc.request(method, params, function(err, res)
    log('<--', { id = id, error = err, result = res })
    cb(err, res)
  end)
  id = n
  log('-->', { id = id, method = method, params = params })
  if not ok then cb({ code = -1, message = 'the docsession server is not running' }) end
end

local function wait_for(method, params)
  local done, e, r = false, nil, nil
  request(method, params, function(err, res) done, e, r = true, err, res end)
  if not vim.wait(config.timeout, function() return done end, 5) then
    return { code = -2, message = method .. ' timed out' }
  end
  return e, r
end

local function notify(method, params)
  if not client then return end
  log('-->', { method = method, params = params })
  client.rpc.notify(method, params)
end

local function detach_all(reason)
  for buf, doc in pairs(docs) do
    doc.detached = true
    pcall(api.nvim_del_augroup_by_name, 'docsession_' .. buf)
    docs[buf] = nil
    if api.nvim_buf_is_valid(buf) then
      vim.b[buf].docsession_state = { flags = { 'detached' }, reason = reason, hasUnsavedChanges = false }
    end
  end
  by_handle = {}
end

local function ensure_client()
  if client then return client end
  local cmd = config.cmd
  local rpc
  rpc = vim.lsp.rpc.start(cmd[1], vim.list_slice(cmd, 2), {
    notification = function(method, params) on_notification(method, params) end,
    on_exit = function(code, signal)
      vim.schedule(function()
        if not client or client.rpc ~= rpc then return end
        client = nil
        detach_all('serverExited')
        if not M._shutting_down then
          warn(('the server exited (status %s, signal %s)'):format(code, signal), vim.log.levels.ERROR)
        end
      end)
    end,
    on_error = function(kind, err)
      warn(('rpc error %s: %s'):format(vim.lsp.rpc.client_errors[kind] or kind, vim.inspect(err)))
    end,
  })
  if not rpc then error('docsession: could not start ' .. table.concat(cmd, ' ')) end
  client = { rpc = rpc }
  M._shutting_down = false
  local v = vim.version()
  local err, res = wait_for('initialize', {
    processId = vim.fn.getpid(),
    clientInfo = { name = 'Neovim', version = ('%d.%d.%d'):format(v.major, v.minor, v.patch) },
    capabilities = { general = { positionEncodings = { 'utf-8' } } },
  })
  if err or res.capabilities.positionEncoding ~= 'utf-8' then
    pcall(rpc.handle.kill, rpc.handle, 15)
    client = nil
    error('docsession: initialize failed: ' .. vim.inspect(err or res))
  end
  client.capabilities = res.capabilities
  notify('initialized', vim.empty_dict())
  return client
end

-- Text model ----------------------------------------------------------------------------------
-- The server's text is the buffer's lines joined with the file's line break, plus a final line
-- break when the buffer has 'eol' (a file without one gets 'noeol' 'nofixeol' at attach, so that
-- Neovim's idea of the file is the server's); a buffer Neovim holds as empty ("--No lines in
-- buffer--", written as 0 bytes) is the empty text.

local function buffer_is_empty(buf)
  if api.nvim_buf_line_count(buf) ~= 1 or api.nvim_buf_get_lines(buf, 0, 1, false)[1] ~= '' then
    return false
  end
  return api.nvim_buf_call(buf, function() return vim.fn.wordcount().bytes end) == 0
end

local function model_text(doc)
  if buffer_is_empty(doc.buf) then return '' end
  local t = table.concat(api.nvim_buf_get_lines(doc.buf, 0, -1, false), doc.nl)
  if doc.eol then t = t .. doc.nl end
  return t
end

-- Byte offset (0-based) of a position in text, clamped as the server clamps (a line past the last
-- one is the end of the text; a character past the end of its line is the end of the line).
local function offset(s, line, character)
  local start = 0
  for _ = 1, line do
    local nl = s:find('\n', start + 1, true)
    if not nl then return #s end
    start = nl
  end
  local eol = s:find('\n', start + 1, true)
  local len = (eol and eol - 1 or #s) - start
  if eol and eol > 1 and s:byte(eol - 1) == 13 then len = len - 1 end
  return start + math.min(character, len)
end

local function position(s, off)
  local line, last = 0, 0
  local i = s:find('\n', 1, true)
  while i and i <= off do
    line, last = line + 1, i
    i = s:find('\n', i + 1, true)
  end
  return { line = line, character = off - last }
end

local function is_cont(b) return b and b >= 0x80 and b < 0xC0 end

-- One edit turning a into b: the common prefix and suffix kept, on character boundaries.
local function diff_edit(a, b)
  if a == b then return nil end
  local n = math.min(#a, #b)
  local p = 0
  while p < n and a:byte(p + 1) == b:byte(p + 1) do p = p + 1 end
  while p > 0 and (is_cont(a:byte(p + 1)) or is_cont(b:byte(p + 1))
      or (a:byte(p) == 13 and (a:byte(p + 1) == 10 or b:byte(p + 1) == 10))) do
    p = p - 1
  end
  local q = 0
  while q < n - p and a:byte(#a - q) == b:byte(#b - q) do q = q + 1 end
  while q > 0 and (is_cont(a:byte(#a - q + 1)) or is_cont(b:byte(#b - q + 1))) do q = q - 1 end
  return {
    range = { start = position(a, p), ['end'] = position(a, #a - q) },
    text = b:sub(p + 1, #b - q),
  }
end

-- Whether s is well-formed UTF-8 (the server refuses anything else in JSON).
local function valid_utf8(s)
  if not s:find('[\128-\255]') then return true end
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local len
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len = 3
    elseif c >= 0xF0 and c <= 0xF4 then len = 4
    else return false end
    for k = 1, len - 1 do
      local b = s:byte(i + k)
      if not b or b < 0x80 or b > 0xBF then return false end
    end
    if len == 3 then
      local b = s:byte(i + 1)
      if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F) then return false end
    elseif len == 4 then
      local b = s:byte(i + 1)
      if (c == 0xF0 and b < 0x90) or (c == 0xF4 and b > 0x8F) then return false end
    end
    i = i + len
  end
  return true
end

local function apply_edit(s, e)
  local a = offset(s, e.range.start.line, e.range.start.character)
  local z = offset(s, e.range['end'].line, e.range['end'].character)
  if z < a then return nil end
  return s:sub(1, a) .. e.text .. s:sub(z + 1)
end

-- The request queue -----------------------------------------------------------------------------
-- One request per document in flight; each edit is sent with the version the previous request
-- answered. Edits made meanwhile are coalesced into the next request.

local pump
local offer_recovery -- defined with the recovery functions below

local function enqueue(doc, op)
  local last = doc.queue[#doc.queue]
  if op.kind == 'edit' and last and last.kind == 'edit' then
    vim.list_extend(last.edits, op.edits)
  else
    table.insert(doc.queue, op)
  end
  pump(doc)
end

local function has_unacked_edits(doc)
  if doc.inflight and (doc.inflight.kind == 'edit' or doc.inflight.kind == 'resync') then return true end
  for _, op in ipairs(doc.queue) do
    if op.kind == 'edit' or op.kind == 'resync' then return true end
  end
  return #doc.batch > 0 or doc.batch_bad
end

pump = function(doc)
  if doc.inflight or #doc.queue == 0 or doc.closed then return end
  local op = table.remove(doc.queue, 1)
  doc.inflight = op
  local function finish()
    doc.inflight = nil
    if op.done then op.done(op.err, op.res) end
    pump(doc)
  end
  if op.kind == 'edit' then
    request('document/edit', { document = doc.handle, version = doc.version, edits = op.edits }, function(err, res)
      op.err, op.res = err, res
      if err then
        -- Stale (-32801), refused for now (-32012) or a position refused (-32602): the queued edits
        -- are dropped and one read of the server's text, compared with the buffer's, replaces them.
        local keep = {}
        for _, o in ipairs(doc.queue) do
          if o.kind ~= 'edit' and o.kind ~= 'resync' then table.insert(keep, o) end
        end
        doc.queue = keep
        table.insert(doc.queue, 1, { kind = 'resync', cause = err })
      else
        doc.version = res.version
      end
      finish()
    end)
  elseif op.kind == 'resync' then
    request('document/read', { document = doc.handle }, function(err, res)
      op.err, op.res = err, res
      if not err then
        doc.version = res.version
        local e = diff_edit(res.text, doc.shadow)
        if e and valid_utf8(e.text) then
          doc.resyncs = doc.resyncs + 1
          table.insert(doc.queue, 1, { kind = 'edit', edits = { e } })
          if op.cause and op.cause.code ~= -32801 then
            warn(('edit refused (%s); the buffer\'s text was sent again'):format(op.cause.message))
          end
        end
      end
      finish()
    end)
  else
    request(op.method, op.params, function(err, res)
      op.err, op.res = err, res
      finish()
    end)
  end
end

-- Buffer changes -> document/edit ---------------------------------------------------------------

local function read_text(buf, sr, sc, nr, nc)
  local lc = api.nvim_buf_line_count(buf)
  local lines
  if nr >= lc then
    local last = api.nvim_buf_get_lines(buf, lc - 1, lc, true)[1]
    lines = api.nvim_buf_get_text(buf, sr, sc, lc - 1, #last, {})
    table.insert(lines, '')
  else
    lines = api.nvim_buf_get_text(buf, sr, sc, nr, nc, {})
  end
  return lines
end

local flush

local function on_bytes(_, buf, _, sr, sc, _, oer, oec, _, ner, nec, neb)
  local doc = docs[buf]
  if not doc or doc.detached then return true end
  if doc.applying then return end -- our own nvim_buf_set_text of a didChange: not echoed
  local ev = { sr = sr, sc = sc, er = sr + oer, ec = (oer == 0) and sc + oec or oec }
  local n_old = doc.lc
  doc.lc = n_old - oer + ner
  if ner == 0 and nec == 0 then
    ev.text = ''
  else
    local ok, lines = pcall(read_text, buf, sr, sc, sr + ner, (ner == 0) and sc + nec or nec)
    -- In the middle of some commands (undo, :s with line breaks) the buffer is not yet what the
    -- event says; the flush's check catches it too, this only finds it sooner.
    if ok and #table.concat(lines, '\n') == neb then
      ev.text = table.concat(lines, doc.nl)
    else
      doc.batch_bad = true
    end
  end
  if ev.text and not doc.eol and ev.er >= n_old then
    -- No final line break: the buffer's last "\n" is not in the text.
    if ev.text:sub(-#doc.nl) == doc.nl then ev.text = ev.text:sub(1, -#doc.nl - 1) end
    if ev.sr >= n_old and ev.text ~= '' then ev.text = doc.nl .. ev.text end
  end
  table.insert(doc.batch, ev)
  if not doc.flush_scheduled then
    doc.flush_scheduled = true
    vim.schedule(function() flush(doc) end)
  end
end

flush = function(doc)
  doc.flush_scheduled = false
  if doc.detached or (#doc.batch == 0 and not doc.batch_bad) then return end
  local batch, bad = doc.batch, doc.batch_bad
  doc.batch, doc.batch_bad = {}, false
  doc.lc = api.nvim_buf_line_count(doc.buf)
  local current = model_text(doc)
  local edits = {}
  if not bad then
    local s = doc.shadow
    for _, ev in ipairs(batch) do
      local e = { range = { start = { line = ev.sr, character = ev.sc }, ['end'] = { line = ev.er, character = ev.ec } }, text = ev.text }
      s = apply_edit(s, e)
      if not s then break end
      if not (ev.text == '' and ev.sr == ev.er and ev.sc == ev.ec) then table.insert(edits, e) end
    end
    bad = s ~= current
  end
  if bad then
    doc.fallbacks = doc.fallbacks + 1
    edits = { diff_edit(doc.shadow, current) }
  end
  for _, e in ipairs(edits) do
    if not valid_utf8(e.text) then
      -- Held back: the next change is sent as one diff from the text the server has.
      if not doc.warned_utf8 then
        warn('the buffer holds bytes that are not UTF-8; its changes are held back until it does not')
        doc.warned_utf8 = true
      end
      doc.batch_bad = true
      return
    end
  end
  doc.warned_utf8 = false
  doc.shadow = current
  if #edits > 0 then enqueue(doc, { kind = 'edit', edits = edits }) end
end

-- Notifications -----------------------------------------------------------------------------------

local function set_state(doc, p)
  local st = {
    flags = p.state or {},
    reason = p.reason,
    hasUnsavedChanges = p.hasUnsavedChanges,
    version = p.version,
    document = doc.handle,
    uri = p.uri or doc.uri,
  }
  if p.error then st.error = p.error.message; st.errorCode = p.error.code end
  -- A conflict with the file itself, told from one with sync tools' conflict copies only.
  if not vim.tbl_contains(st.flags, 'inConflict') then
    doc.file_conflict = false
  elseif p.reason == 'externalChange' or p.reason == 'recovered' then
    doc.file_conflict = true
  elseif p.reason == 'saved' or p.reason == 'reverted' or p.reason == 'reloaded' then
    doc.file_conflict = false
  end
  doc.state = st
  if api.nvim_buf_is_valid(doc.buf) then vim.b[doc.buf].docsession_state = st end
end

local function apply_remote_edits(doc, edits, version)
  local buf = doc.buf
  local target = doc.shadow
  for _, e in ipairs(edits) do
    target = apply_edit(target, e) or target
  end
  doc.applying = true
  local ok = pcall(function()
    local shadow = doc.shadow
    local lc = api.nvim_buf_line_count(buf)
    for _, e in ipairs(edits) do
      local s, z, t = e.range.start, e.range['end'], e.text
      if doc.eol and z.line >= lc and t:sub(-#doc.nl) == doc.nl and not buffer_is_empty(buf) then
        -- The range reaches past the final line break (where no buffer position is): keep that
        -- break and move the one of the text to the front when it is an insertion at the end.
        local last = #api.nvim_buf_get_lines(buf, lc - 1, lc, true)[1]
        t = t:sub(1, -#doc.nl - 1)
        z = { line = lc - 1, character = last }
        if s.line >= lc then
          s = z
          t = doc.nl .. t
        end
      end
      if s.line >= lc or z.line >= lc then error('past the last line') end
      local z_line = api.nvim_buf_get_lines(buf, z.line, z.line + 1, true)[1]
      api.nvim_buf_set_text(buf, s.line, s.character, z.line, math.min(z.character, #z_line),
        vim.split(t, doc.nl, { plain = true }))
      shadow = apply_edit(shadow, e)
      lc = api.nvim_buf_line_count(buf)
    end
  end)
  if not ok or model_text(doc) ~= target then
    doc.remote_fallbacks = doc.remote_fallbacks + 1
    -- An edit at the very end of the text (past the last line) or a mismatch: take the whole text.
    local body = target
    if doc.eol and body:sub(-#doc.nl) == doc.nl then body = body:sub(1, -#doc.nl - 1) end
    api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(body, doc.nl, { plain = true }))
  end
  doc.applying = false
  doc.lc = api.nvim_buf_line_count(buf)
  doc.shadow = target
  doc.version = version
end

-- Make the buffer hold text (from the server) whole; 'eol' follows the text's final line break.
local function take_text(doc, text)
  local buf = doc.buf
  if text ~= '' then
    doc.eol = text:sub(-#doc.nl) == doc.nl
    vim.bo[buf].eol = doc.eol
    if not doc.eol then vim.bo[buf].fixeol = false end
  end
  local body = (doc.eol and text ~= '') and text:sub(1, -#doc.nl - 1) or text
  doc.applying = true
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(body, doc.nl, { plain = true }))
  doc.applying = false
  doc.lc = api.nvim_buf_line_count(buf)
  doc.shadow = text
end

-- Sync tools' conflict copies ------------------------------------------------------------------
-- doc.copies: the document/versions entries of kind syncConflict not yet resolved ({ id, date,
-- size, tool, device?, uri }), refreshed after a syncConflict or conflictResolved notification
-- (from the request queue, never waited on there) and at the attach when the document opens
-- inConflict.

-- An ISO 8601 date of the server (UTC) in local time, by fmt.
local function local_time(iso, fmt)
  local y, mo, d, h, mi, sec = tostring(iso):match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)')
  if not y then return tostring(iso) end
  -- os.time reads the fields as local time: add the offset back.
  local t = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
    min = tonumber(mi), sec = tonumber(sec) })
  local off = os.time(os.date('*t', t)) - os.time(os.date('!*t', t))
  return os.date(fmt, t + off)
end

local function copy_name(c) return vim.fn.fnamemodify(vim.uri_to_fname(c.uri), ':t') end

-- "syncthing (device ABCDEFG, 2026-11-28 10:15)"
local function describe_copy(c)
  local device = (type(c.device) == 'string' and c.device ~= '') and ('device ' .. c.device .. ', ') or ''
  return ('%s (%s%s)'):format(c.tool, device, local_time(c.date, '%Y-%m-%d %H:%M'))
end

local function sync_copies_of(res)
  local copies = {}
  for _, v in ipairs(type(res) == 'table' and res.versions or {}) do
    if v.kind == 'syncConflict' and v.resolved ~= true then table.insert(copies, v) end
  end
  return copies
end

-- Take the list of copies; tell about the new ones.
local function take_copies(doc, copies)
  local known = {}
  for _, c in ipairs(doc.copies or {}) do known[c.id] = true end
  local new = {}
  for _, c in ipairs(copies) do
    if not known[c.id] then table.insert(new, c) end
  end
  doc.copies = copies
  pcall(vim.cmd, 'redrawstatus')
  if #new > 0 then
    local what
    if #new == 1 then
      what = 'a conflict copy from ' .. describe_copy(new[1])
    else
      local parts = {}
      for _, c in ipairs(new) do table.insert(parts, describe_copy(c)) end
      what = ('%d new conflict copies, from %s'):format(#new, table.concat(parts, '; '))
    end
    warn(('%s has %s: :DocSessionResolveSync'):format(vim.fn.fnamemodify(doc.path, ':t'), what),
      vim.log.levels.INFO)
  end
end

-- Ask for the list of copies through the document's queue, without waiting for the answer.
local function refresh_copies(doc)
  if doc.refresh_pending then return end
  doc.refresh_pending = true
  vim.schedule(function()
    if doc.detached then doc.refresh_pending = false; return end
    enqueue(doc, { kind = 'call', method = 'document/versions', params = { document = doc.handle },
      done = function(err, res)
        vim.schedule(function()
          doc.refresh_pending = false
          if doc.detached then return end
          if err then
            warn('listing the conflict copies failed: ' .. tostring(err.message))
          else
            take_copies(doc, sync_copies_of(res))
          end
        end)
      end })
  end)
end

local handlers = {}

handlers['document/stateChanged'] = function(doc, p)
  set_state(doc, p)
  if p.reason == 'closed' then
    M.detach(doc.buf, { closed = true })
    return
  end
  if p.error and (p.reason == 'saveFailed' or p.reason == 'externalChange' or p.reason == 'deletedOnDisk'
      or p.reason == 'revertFailed') then
    warn(p.error.message)
  end
  if p.hasUnsavedChanges == false and (p.reason == 'reloaded' or p.reason == 'reverted' or p.reason == 'conflictResolved')
      and not has_unacked_edits(doc) and api.nvim_buf_is_valid(doc.buf) then
    vim.bo[doc.buf].modified = false
  end
  if p.reason == 'syncConflict' or p.reason == 'conflictResolved' then refresh_copies(doc) end
  pcall(vim.cmd, 'redrawstatus')
end

handlers['document/didChange'] = function(doc, p)
  flush(doc)
  if has_unacked_edits(doc) then
    -- The server took the file's text while edits of ours were on their way: they will be refused
    -- as stale, and the resync sends the buffer's text (the server's undo brings the file's back).
    doc.overridden = p
    warn('the file changed on disk while edits were being sent; the buffer\'s text is kept')
    return
  end
  local was_modified = vim.bo[doc.buf].modified
  apply_remote_edits(doc, p.edits, p.version)
  if not was_modified or (doc.state and doc.state.hasUnsavedChanges == false) then
    vim.bo[doc.buf].modified = false
  end
end

handlers['document/didMove'] = function(doc, p)
  local path = vim.uri_to_fname(p.uri)
  doc.uri, doc.path = p.uri, path
  -- As :file does: the buffer takes the new name (its swap file is renamed with it), the old name
  -- stays as the alternate file, and the buffer is marked "not edited" by Neovim (writes go through
  -- the server anyway).
  api.nvim_buf_set_name(doc.buf, path)
  if doc.state then
    doc.state.uri = p.uri
    vim.b[doc.buf].docsession_state = doc.state
  end
  pcall(vim.cmd, 'redrawstatus')
end

on_notification = function(method, params)
  log('<--', { method = method, params = params })
  local h = handlers[method]
  if not h or type(params) ~= 'table' then return end
  local buf = by_handle[params.document]
  local doc = buf and docs[buf]
  if doc and not doc.detached then h(doc, params) end
end

-- Save, attach, detach ------------------------------------------------------------------------------

local function run_sync(doc, method, params)
  local done = false
  local op = { kind = 'call', method = method, params = params, done = function() done = true end }
  enqueue(doc, op)
  if not vim.wait(config.timeout, function() return done end, 5) then
    return { code = -2, message = method .. ' timed out' }
  end
  return op.err, op.res
end

local function on_write(buf)
  local doc = docs[buf]
  if not doc then return end
  local afile = vim.fn.fnamemodify(vim.fn.expand('<afile>'), ':p')
  local bufname = vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':p')
  if afile ~= doc.path and afile ~= bufname then
    -- :w other-file writes a copy, as Neovim does; the document stays where it is.
    local body = model_text(doc)
    local f = assert(io.open(afile, 'wb'))
    f:write(body)
    f:close()
    print(('"%s" written (a copy, not through docsession)'):format(afile))
    return
  end
  flush(doc)
  -- 'eol' or 'fixeol' changed since the attach: add or remove the final line break first.
  local want_eol = vim.bo[buf].eol or (vim.bo[buf].fixeol and not vim.bo[buf].binary)
  if want_eol ~= doc.eol then
    doc.eol = want_eol
    vim.bo[buf].eol = want_eol
    local current = model_text(doc)
    local e = diff_edit(doc.shadow, current)
    doc.shadow = current
    if e then enqueue(doc, { kind = 'edit', edits = { e } }) end
  end
  local params = { document = doc.handle }
  if vim.v.cmdbang == 1 then params.force = true end
  if afile ~= doc.path then params.to = vim.uri_from_fname(afile) end
  local err, res = run_sync(doc, 'document/save', params)
  if err then
    warn(('saving %s failed: %s%s'):format(afile, err.message,
      err.code == -32017 and ' (:w! overwrites it)' or ''), vim.log.levels.ERROR)
    return
  end
  if res.uri then
    doc.uri, doc.path = res.uri, vim.uri_to_fname(res.uri)
  end
  if not has_unacked_edits(doc) then vim.bo[buf].modified = false end
  print(('"%s" written through docsession, version %d, %d bytes'):format(doc.path, res.version, res.size or -1))
end

-- Recovery of a dead server's unsaved changes ----------------------------------------------------

local function describe_recovery(doc, r)
  local date = r.date
  local y, mo, d, h, mi, sec = tostring(r.date):match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)')
  if y then
    -- UTC to local time: os.time reads the fields as local time, so add the offset back.
    local t = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
      min = tonumber(mi), sec = tonumber(sec) })
    local offset = os.time(os.date('*t', t)) - os.time(os.date('!*t', t))
    date = os.date('%Y-%m-%d %H:%M:%S', t + offset)
  end
  local s = ('%s has unsaved changes of an earlier session (%s, %d edit%s)'):format(
    vim.fn.fnamemodify(doc.path, ':t'), date, r.edits, r.edits == 1 and '' or 's')
  if r.fileMatchesBase ~= true then
    s = s .. '; the file changed since: recovering gives a conflict to resolve'
  end
  if type(r.cut) == 'table' then
    s = s .. ("; the journal's last %d bytes were %s and are lost"):format(r.cut.bytes, r.cut.reason)
  end
  return s
end

local function bufnr(buf) return (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf end

-- Take back the unsaved changes an earlier server left for the buffer's file (document/recover):
-- the buffer takes the recovered text. Returns the result, or nil and the error.
function M.recover(buf)
  buf = bufnr(buf)
  local doc = docs[buf]
  if not doc then return nil, { code = -1, message = 'the buffer is not attached' } end
  flush(doc)
  local err, res = run_sync(doc, 'document/recover', { document = doc.handle })
  if err then
    if err.code == -32025 then doc.recovery = nil end
    warn(('recovering failed: %s%s'):format(err.message, err.code == -32023
      and ' (save or undo the buffer\'s changes first, or :DocSessionDiscardRecovery)' or ''), vim.log.levels.ERROR)
    return nil, err
  end
  doc.recovery = nil
  local target = doc.shadow
  for _, e in ipairs(res.edits) do
    target = target and apply_edit(target, e)
  end
  if target then
    apply_remote_edits(doc, res.edits, res.version)
    -- The recovered text may end otherwise than the file did: the buffer's 'eol' follows it.
    if model_text(doc) ~= doc.shadow then take_text(doc, doc.shadow) end
  else
    -- The edits do not fit the text the buffer has: take the server's.
    local rerr, read = run_sync(doc, 'document/read', { document = doc.handle })
    if rerr then
      warn('reading the recovered text failed: ' .. rerr.message, vim.log.levels.ERROR)
      return nil, rerr
    end
    take_text(doc, read.text)
  end
  doc.version = res.version
  vim.bo[buf].modified = res.hasUnsavedChanges == true
  -- The statusline first: a redraw after a message may wait for the message to be seen.
  pcall(vim.cmd, 'redrawstatus')
  if res.inConflict then
    warn('recovered; the file changed since: the document is in conflict (:w! overwrites the file)')
  else
    print('docsession: recovered the unsaved changes')
  end
  return res
end

-- Delete the unsaved changes an earlier server left for the buffer's file (document/discardRecovery).
function M.discard_recovery(buf)
  buf = bufnr(buf)
  local doc = docs[buf]
  if not doc then return nil, { code = -1, message = 'the buffer is not attached' } end
  local err = run_sync(doc, 'document/discardRecovery', { document = doc.handle })
  if err then
    if err.code == -32025 then doc.recovery = nil end
    warn('discarding failed: ' .. err.message, vim.log.levels.ERROR)
    return nil, err
  end
  doc.recovery = nil
  pcall(vim.cmd, 'redrawstatus')
  print('docsession: discarded the unsaved changes of the earlier session')
  return true
end

-- Sync tools' conflict copies: resolve, show ----------------------------------------------------

-- The sync tools' conflict copies beside the buffer's file, asked of the server now (and kept for
-- status()): a list of { id, date, size, tool, device?, uri }. Returns nil and the error on failure.
function M.sync_copies(buf)
  buf = bufnr(buf)
  local doc = docs[buf]
  if not doc then return nil, { code = -1, message = 'the buffer is not attached' } end
  flush(doc)
  local err, res = run_sync(doc, 'document/versions', { document = doc.handle })
  if err then return nil, err end
  take_copies(doc, sync_copies_of(res))
  return doc.copies
end

-- A scratch buffer named name holding text, read-only, shown in a split; the cursor stays.
local function show_scratch(name, text, filetype)
  local old = vim.fn.bufnr(name)
  if old ~= -1 then pcall(api.nvim_buf_delete, old, { force = true }) end
  local sbuf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(sbuf, name)
  text = text:gsub('\r\n', '\n'):gsub('\r', '\n')
  if text:sub(-1) == '\n' then text = text:sub(1, -2) end
  api.nvim_buf_set_lines(sbuf, 0, -1, false, vim.split(text, '\n', { plain = true }))
  vim.bo[sbuf].bufhidden = 'wipe'
  if filetype and filetype ~= '' then vim.bo[sbuf].filetype = filetype end
  vim.bo[sbuf].modifiable = false
  vim.bo[sbuf].readonly = true
  local win = api.nvim_get_current_win()
  pcall(vim.cmd, 'sbuffer ' .. sbuf)
  if api.nvim_win_is_valid(win) then api.nvim_set_current_win(win) end
  return sbuf
end

-- Settle the conflict copy id (its version id, "sync:NAME"; nil: the only one) with resolution
-- 'mine' (keep the buffer's text), 'theirs' (take the copy's) or 'merge' (merge the copy into the
-- buffer). The server removes the settled copy. Returns the server's answer, or nil and the error;
-- a merge whose sides changed the same lines changes nothing: its regions are shown in a scratch
-- buffer, whose number is the answer's `regions_buffer`.
-- The id of the buffer's only conflict copy, or nil and an error naming the command that picks one.
local function only_copy(buf, command)
  local copies, lerr = M.sync_copies(buf)
  if not copies then return nil, lerr end
  if #copies ~= 1 then
    local e = { code = -1, message = #copies == 0 and 'the document has no conflict copies'
      or ('%d conflict copies: name one (:%s picks it)'):format(#copies, command) }
    warn(e.message)
    return nil, e
  end
  return copies[1].id
end

function M.resolve_sync(buf, resolution, id)
  buf = bufnr(buf)
  local doc = docs[buf]
  if not doc then return nil, { code = -1, message = 'the buffer is not attached' } end
  if not id then
    local only, e = only_copy(buf, 'DocSessionResolveSync')
    if not only then return nil, e end
    id = only
  end
  flush(doc)
  local err, res = run_sync(doc, 'document/resolveConflict', { document = doc.handle, resolution = resolution, id = id })
  if err then
    warn(('resolving %s failed: %s'):format(id, err.message), vim.log.levels.ERROR)
    return nil, err
  end
  local name = id:gsub('^sync:', '')
  if res.resolved ~= true then
    local lines = { ('%s and its conflict copy %s changed the same lines: nothing was changed.'):format(
      vim.fn.fnamemodify(doc.path, ':t'), name), 'Resolve with mine or theirs (or edit the buffer, then mine).' }
    for _, c in ipairs(res.conflicts or {}) do
      table.insert(lines, '')
      table.insert(lines, ('@@ lines %d-%d @@'):format(c.range.start.line + 1,
        math.max(c.range.start.line + 1, c.range['end'].line)))
      for _, side in ipairs({ { 'mine', '<<<<<<< mine (the buffer)' }, { 'base', '||||||| base' },
          { 'theirs', '======= theirs (the copy)' } }) do
        table.insert(lines, side[2])
        local t = (c[side[1]] or ''):gsub('\r\n', '\n')
        if t:sub(-1) == '\n' then t = t:sub(1, -2) end
        if t ~= '' or c[side[1]] == '\n' then vim.list_extend(lines, vim.split(t, '\n', { plain = true })) end
      end
      table.insert(lines, '>>>>>>>')
    end
    res.regions_buffer = show_scratch('docsession://merge/' .. name, table.concat(lines, '\n'))
    warn(('%d region%s changed on both sides; nothing changed: resolve with mine or theirs'):format(
      #(res.conflicts or {}), #(res.conflicts or {}) == 1 and '' or 's'))
    return res
  end
  local target = doc.shadow
  for _, e in ipairs(res.edits or {}) do
    target = target and apply_edit(target, e)
  end
  if target then
    apply_remote_edits(doc, res.edits or {}, res.version)
    -- The copy's text may end otherwise than the buffer's did: 'eol' follows it.
    if model_text(doc) ~= doc.shadow then take_text(doc, doc.shadow) end
  else
    local rerr, read = run_sync(doc, 'document/read', { document = doc.handle })
    if rerr then
      warn('reading the resolved text failed: ' .. rerr.message, vim.log.levels.ERROR)
      return nil, rerr
    end
    take_text(doc, read.text)
  end
  doc.version = res.version
  vim.bo[buf].modified = doc.state ~= nil and doc.state.hasUnsavedChanges == true
  local left = {}
  for _, c in ipairs(doc.copies or {}) do
    if c.id ~= id then table.insert(left, c) end
  end
  doc.copies = left
  pcall(vim.cmd, 'redrawstatus')
  print(('docsession: resolved %s with %s%s'):format(name, resolution,
    #left > 0 and ('; %d more conflict %s'):format(#left, #left == 1 and 'copy waits' or 'copies wait') or ''))
  return res
end

-- Show the text of the conflict copy id (nil: the only one) in a read-only scratch buffer, in a
-- split. Returns the scratch buffer's number, or nil and the error.
function M.show_copy(buf, id)
  buf = bufnr(buf)
  local doc = docs[buf]
  if not doc then return nil, { code = -1, message = 'the buffer is not attached' } end
  if not id then
    local only, e = only_copy(buf, 'DocSessionShowCopy')
    if not only then return nil, e end
    id = only
  end
  local err, res = M.call(buf, 'document/readVersion', { id = id })
  if err then
    warn(('reading %s failed: %s'):format(id, err.message), vim.log.levels.ERROR)
    return nil, err
  end
  return show_scratch('docsession://copy/' .. id:gsub('^sync:', ''), res.text, vim.bo[buf].filetype)
end

-- Pick a conflict copy of the buffer (vim.ui.select when there are several, each with its tool,
-- device and date) and call on_pick(id).
function M.pick_copy(buf, prompt, on_pick)
  buf = bufnr(buf)
  local copies = M.sync_copies(buf)
  if not copies then
    warn('the buffer is not attached')
    return
  end
  if #copies == 0 then
    warn(vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':t') .. ' has no conflict copies', vim.log.levels.INFO)
  elseif #copies == 1 then
    on_pick(copies[1].id)
  else
    vim.ui.select(copies, {
      prompt = prompt,
      format_item = function(c) return copy_name(c) .. ': ' .. describe_copy(c) end,
    }, function(c) if c then on_pick(c.id) end end)
  end
end

offer_recovery = function(doc, pushed)
  local description = describe_recovery(doc, doc.recovery)
  if pushed then
    -- Recovering would replace the buffer's own changes (the server refuses it): the offer waits.
    warn(description .. '; the buffer has changes of its own: save or undo them, then :DocSessionRecover, or :DocSessionDiscardRecovery')
    return
  end
  local action = config.recovery
  if action == 'ask' then
    local ok, choice = pcall(vim.fn.confirm, description .. '.', '&Recover\n&Discard\n&Later', 3, 'Question')
    action = ok and ({ 'recover', 'discard' })[choice] or 'ignore'
  end
  if action == 'recover' then
    M.recover(doc.buf)
  elseif action == 'discard' then
    M.discard_recovery(doc.buf)
  else
    warn(description .. '; :DocSessionRecover takes them back, :DocSessionDiscardRecovery deletes them',
      vim.log.levels.INFO)
  end
end

-- The unsaved changes of earlier servers that can be recovered (workspace/recoverable), newest
-- first: { uri, date, edits, version, open }. Returns the list, or nil and the error.
function M.recoverable()
  ensure_client()
  local err, res = wait_for('workspace/recoverable', nil)
  if err then return nil, err end
  return res.journals
end

function M.attach(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  if docs[buf] then return docs[buf] end
  local name = api.nvim_buf_get_name(buf)
  if name == '' then
    warn('the buffer has no file name', vim.log.levels.ERROR)
    return nil
  end
  local path = vim.fn.fnamemodify(name, ':p')
  ensure_client()
  local err, info = wait_for('document/open', { uri = vim.uri_from_fname(path) })
  if err then
    warn(('cannot open %s: %s'):format(path, err.message), vim.log.levels.ERROR)
    return nil
  end
  if by_handle[info.document] then
    warn(('%s is already attached in buffer %d'):format(path, by_handle[info.document]), vim.log.levels.ERROR)
    return nil
  end
  if info.lineEnding == 'cr' or info.lineEnding == 'mixed' then
    wait_for('document/close', { document = info.document, save = 'never' })
    warn(('%s has %s line endings, which the plugin does not map yet'):format(path, info.lineEnding), vim.log.levels.ERROR)
    return nil
  end
  local doc = {
    buf = buf, handle = info.document, uri = info.uri, path = vim.uri_to_fname(info.uri),
    version = info.version, nl = info.lineEnding == 'crlf' and '\r\n' or '\n',
    queue = {}, batch = {}, batch_bad = false, resyncs = 0, fallbacks = 0, remote_fallbacks = 0,
  }
  local text = info.text
  if text == '' then
    doc.eol = vim.bo[buf].fixeol or vim.bo[buf].eol -- an empty file: as Neovim would write it
  else
    doc.eol = text:sub(-#doc.nl) == doc.nl
    vim.bo[buf].eol = doc.eol
    if not doc.eol then vim.bo[buf].fixeol = false end
  end
  docs[buf], by_handle[doc.handle] = doc, buf
  local current = model_text(doc)
  doc.shadow = text
  local pushed = false
  if current ~= text then
    if vim.bo[buf].modified then
      pushed = true
      -- The buffer has changes Neovim made before the attach: they go to the server.
      local e = diff_edit(text, current)
      doc.shadow = current
      enqueue(doc, { kind = 'edit', edits = { e } })
    else
      -- The file is not what Neovim read: show the server's (the file's) text.
      local body = doc.eol and text:sub(1, -#doc.nl - 1) or text
      api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(body, doc.nl, { plain = true }))
      vim.bo[buf].modified = false
    end
  end
  doc.lc = api.nvim_buf_line_count(buf)
  -- 'acwrite': every write goes through BufWriteCmd, and Neovim's own checks for a file it did not
  -- edit (E13 after a rename, as :file leaves it) do not apply.
  doc.saved_buftype = vim.bo[buf].buftype
  vim.bo[buf].buftype = 'acwrite'
  set_state(doc, info)
  api.nvim_buf_attach(buf, false, {
    on_bytes = on_bytes,
    on_detach = function() if docs[buf] == doc then M.detach(buf) end end,
    on_reload = function()
      -- :edit! reloaded the buffer from the file: the server's text is the file's.
      vim.schedule(function()
        if docs[buf] ~= doc then return end
        doc.shadow = model_text(doc)
        enqueue(doc, { kind = 'resync' })
      end)
    end,
  })
  local group = api.nvim_create_augroup('docsession_' .. buf, { clear = true })
  api.nvim_create_autocmd('BufWriteCmd', { group = group, buffer = buf, callback = function() on_write(buf) end })
  api.nvim_create_autocmd({ 'BufUnload', 'BufWipeout' }, { group = group, buffer = buf,
    callback = function() M.detach(buf) end })
  if info.editedElsewhere then
    doc.edited_elsewhere = true
    warn(('%s has unsaved changes in another docsession server that is running; changes made here and there will conflict')
      :format(vim.fn.fnamemodify(path, ':t')))
  end
  if type(info.recovery) == 'table' then
    doc.recovery = info.recovery
    offer_recovery(doc, pushed)
  end
  if vim.tbl_contains(info.state or {}, 'inConflict') then
    -- Opened beside sync tools' conflict copies: list them now.
    local verr, versions = run_sync(doc, 'document/versions', { document = doc.handle })
    if verr then
      warn('listing the conflict copies failed: ' .. tostring(verr.message))
    else
      take_copies(doc, sync_copies_of(versions))
    end
  end
  return doc
end

-- Close the document (its unsaved changes stay in the buffer, which is no longer backed by the
-- server: Neovim's own :write takes over).
function M.detach(buf, opts)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local doc = docs[buf]
  if not doc then return end
  doc.detached = true
  pcall(api.nvim_del_augroup_by_name, 'docsession_' .. buf)
  if not (opts and opts.closed) and client then
    doc.queue = {}
    doc.inflight = nil
    wait_for('document/close', { document = doc.handle, save = 'never' })
  end
  doc.closed = true
  docs[buf], by_handle[doc.handle] = nil, nil
  if api.nvim_buf_is_valid(buf) and vim.bo[buf].buftype == 'acwrite' then
    vim.bo[buf].buftype = doc.saved_buftype or ''
  end
  if api.nvim_buf_is_valid(buf) then
    vim.b[buf].docsession_state = { flags = { 'closed' }, reason = 'closed', hasUnsavedChanges = false }
  end
end

function M.state(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local doc = docs[buf]
  if not doc then return nil end
  flush(doc)
  local err, res = run_sync(doc, 'document/state', { document = doc.handle })
  return res, err
end

-- For the statusline: '%{v:lua.require("docsession").status()}'.
function M.status(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local doc = docs[buf]
  if not doc then return '' end
  local st = doc.state or {}
  local parts = { 'ds:' .. doc.handle .. ' v' .. tostring(doc.version) }
  if st.hasUnsavedChanges then table.insert(parts, '+') end
  if doc.recovery then table.insert(parts, 'recoverable') end
  local copies = #(doc.copies or {})
  for _, f in ipairs(st.flags or {}) do
    if f == 'inConflict' and not doc.file_conflict then
      -- Only sync tools' conflict copies wait ('?' until their list is in).
      table.insert(parts, 'copies:' .. (copies > 0 and tostring(copies) or '?'))
    else
      table.insert(parts, f)
      if f == 'inConflict' and copies > 0 then table.insert(parts, 'copies:' .. copies) end
    end
  end
  return '[' .. table.concat(parts, ' ') .. ']'
end

-- Wait until every change of the buffer has been sent and answered (for scripts and tests).
function M.sync(buf, timeout)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local doc = docs[buf]
  if not doc then return false end
  flush(doc)
  return vim.wait(timeout or config.timeout, function()
    if #doc.batch > 0 or doc.batch_bad then flush(doc) end
    return not doc.inflight and #doc.queue == 0
  end, 5)
end

-- A request about the buffer's document, in order with its edits: M.call(buf, 'document/read').
function M.call(buf, method, params)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local doc = docs[buf]
  if not doc then return { code = -1, message = 'the buffer is not attached' } end
  flush(doc)
  params = vim.tbl_extend('keep', params or {}, { document = doc.handle })
  return run_sync(doc, method, params)
end

function M.get(buf)
  return docs[(buf == nil or buf == 0) and api.nvim_get_current_buf() or buf]
end

function M.shutdown()
  if not client then return end
  M._shutting_down = true
  for buf in pairs(docs) do M.detach(buf) end
  wait_for('shutdown', nil)
  notify('exit', nil)
  local c = client
  vim.wait(1000, function() return client == nil end, 10)
  if client == c then
    pcall(c.rpc.handle.kill, c.rpc.handle, 15)
    client = nil
  end
end

function M.setup(opts)
  config = vim.tbl_extend('force', config, opts or {})
  local group = api.nvim_create_augroup('docsession', { clear = true })
  api.nvim_create_autocmd('VimLeavePre', { group = group, callback = function() M.shutdown() end })
end

-- A request outside any document's queue, waited on (for tests and scripts).
function M.request(method, params) ensure_client(); return wait_for(method, params) end

M._server_pid = function() return client and client.rpc.pid end

M._text = { offset = offset, position = position, diff_edit = diff_edit, model_text = model_text }

return M
