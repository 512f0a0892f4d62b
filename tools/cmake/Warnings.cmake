# Warnings every target of ours compiles with.
function(loupe_warnings target)
  # Designated initializers leave the rest at their defaults on purpose.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
                                           -Wno-missing-field-initializers)
endfunction()
