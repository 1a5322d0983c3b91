-- :DocSessionAttach, :DocSessionDetach, :DocSessionState, :DocSessionRecover,
-- :DocSessionDiscardRecovery, :DocSessionRecoverable, :DocSessionResolveSync, :DocSessionShowCopy
-- (docsession.nvim, Neovim 0.7+).
if vim.g.loaded_docsession then return end
vim.g.loaded_docsession = true

vim.api.nvim_create_user_command('DocSessionAttach', function()
  require('docsession').attach(0)
end, { desc = 'Open the current buffer\'s file through the docsession server' })

vim.api.nvim_create_user_command('DocSessionDetach', function()
  require('docsession').detach(0)
end, { desc = 'Close the current buffer\'s document (its text stays in the buffer)' })

vim.api.nvim_create_user_command('DocSessionState', function()
  local ds = require('docsession')
  local res, err = ds.state(0)
  if not res then
    print(err and err.message or 'docsession: the buffer is not attached')
    return
  end
  print(ds.status(0) .. ' ' .. vim.inspect(res))
end, { desc = 'Show the document\'s state as the server has it' })

vim.api.nvim_create_user_command('DocSessionRecover', function()
  require('docsession').recover(0)
end, { desc = 'Take back the unsaved changes an earlier docsession server left for this file' })

vim.api.nvim_create_user_command('DocSessionDiscardRecovery', function()
  require('docsession').discard_recovery(0)
end, { desc = 'Delete the unsaved changes an earlier docsession server left for this file' })

vim.api.nvim_create_user_command('DocSessionRecoverable', function()
  local journals, err = require('docsession').recoverable()
  if not journals then
    print('docsession: ' .. (err and err.message or 'workspace/recoverable failed'))
    return
  end
  if #journals == 0 then
    print('docsession: no unsaved changes to recover')
    return
  end
  -- The quickfix list: one entry a file, newest first; opening a file and attaching it offers them.
  local items = {}
  for _, j in ipairs(journals) do
    table.insert(items, {
      filename = vim.uri_to_fname(j.uri), lnum = 1,
      text = ('%s, %d edit%s%s'):format(j.date, j.edits, j.edits == 1 and '' or 's',
        j.open and ' (attached: :DocSessionRecover there)' or ''),
    })
  end
  vim.fn.setqflist({}, ' ', { title = 'docsession: unsaved changes to recover', items = items })
  vim.cmd('copen')
end, { desc = 'List the unsaved changes of earlier docsession servers (the quickfix list)' })

vim.api.nvim_create_user_command('DocSessionResolveSync', function(a)
  local ds = require('docsession')
  local buf = vim.api.nvim_get_current_buf()
  local resolution = a.args ~= '' and a.args or nil
  if resolution and resolution ~= 'mine' and resolution ~= 'theirs' and resolution ~= 'merge' then
    vim.notify('docsession: resolve with mine, theirs or merge', vim.log.levels.ERROR)
    return
  end
  ds.pick_copy(buf, 'Resolve the conflict copy:', function(id)
    if resolution then
      ds.resolve_sync(buf, resolution, id)
      return
    end
    vim.ui.select({ 'mine', 'theirs', 'merge' }, { prompt = 'Resolve ' .. id:gsub('^sync:', '') .. ' with:' },
      function(choice) if choice then ds.resolve_sync(buf, choice, id) end end)
  end)
end, {
  nargs = '?',
  complete = function() return { 'mine', 'theirs', 'merge' } end,
  desc = 'Resolve a sync tool\'s conflict copy of the file: mine, theirs or merge',
})

vim.api.nvim_create_user_command('DocSessionShowCopy', function()
  local ds = require('docsession')
  local buf = vim.api.nvim_get_current_buf()
  ds.pick_copy(buf, 'Show the conflict copy:', function(id) ds.show_copy(buf, id) end)
end, { desc = 'Show a sync tool\'s conflict copy of the file in a scratch buffer' })
