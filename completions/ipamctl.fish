complete --keep-order --exclusive --command ipamctl --arguments "(COMPLETE=fish ipamctl -- (commandline --current-process --tokenize --cut-at-cursor) (commandline --current-token))"
