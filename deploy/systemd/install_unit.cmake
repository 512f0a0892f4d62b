# Installs one unit of deploy/systemd with the paths of this installation, so
# that `cmake --install build --prefix /opt/loupe` gives units that start the
# installed binaries with the installed config. Run by `cmake --install`
# (install(CODE) in deploy/CMakeLists.txt) with LOUPE_UNIT (the source file),
# and LOUPE_UNIT_DIR, LOUPE_BINDIR, LOUPE_SYSCONFDIR, LOUPE_DOCDIR: each
# absolute, or relative to the install prefix as install() reads them.
foreach(var LOUPE_UNIT_DIR LOUPE_BINDIR LOUPE_SYSCONFDIR LOUPE_DOCDIR)
  if(NOT IS_ABSOLUTE "${${var}}")
    set(${var} "${CMAKE_INSTALL_PREFIX}/${${var}}")
  endif()
endforeach()
file(READ "${LOUPE_UNIT}" unit)
string(REPLACE "file:///usr/share/doc/loupe/" "file://${LOUPE_DOCDIR}/" unit "${unit}")
string(REPLACE "/usr/bin/" "${LOUPE_BINDIR}/" unit "${unit}")
string(REPLACE "/etc/loupe/" "${LOUPE_SYSCONFDIR}/loupe/" unit "${unit}")
get_filename_component(name "${LOUPE_UNIT}" NAME)
set(destination "$ENV{DESTDIR}${LOUPE_UNIT_DIR}/${name}")
message(STATUS "Installing: ${destination}")
file(WRITE "${destination}" "${unit}")
file(CHMOD "${destination}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${destination}")
