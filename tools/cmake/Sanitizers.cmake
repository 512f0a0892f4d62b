# -DLOUPE_SANITIZE=address,undefined builds everything with those sanitizers;
# CI uses it for the reader tests that feed corrupt input.
if(LOUPE_SANITIZE)
  add_compile_options(-fsanitize=${LOUPE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${LOUPE_SANITIZE})
endif()
