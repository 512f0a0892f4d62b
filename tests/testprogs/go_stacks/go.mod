module loupe/go_stacks

go 1.19
