-- :DocSessionAttach, :DocSessionDetach, :DocSessionState (docsession.nvim, Neovim 0.7+).
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
