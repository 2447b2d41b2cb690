# Install-time part of hubd's install rules (included by the install rules of
# the top-level CMakeLists.txt; runs inside "cmake --install" and cpack).
#
# Paths that depend on the prefix are decided here, from the prefix in force
# at install time ("cmake --install build --prefix /usr" and cpack's /usr), not
# from the one the build was configured with:
#   configuration  /etc/hubd/hubd.conf when the prefix is /usr, else
#                  <prefix>/etc/hubd/hubd.conf (GNUInstallDirs' rule); an
#                  absolute CMAKE_INSTALL_SYSCONFDIR is used as it is
#   systemd units  HUBD_SYSTEMD_UNITDIR; empty (the default) means
#                  /lib/systemd/system when the prefix is /usr (where Debian 12
#                  ships packaged units, pkg-config systemd
#                  systemdsystemunitdir), else <prefix>/lib/systemd/system
#                  (also on systemd's search path); a relative value is taken
#                  relative to the prefix
#   sysusers.d     <prefix>/lib/sysusers.d
# The units in systemd/ name /usr/sbin/hubd and /etc/hubd/hubd.conf; for any
# other prefix the installed copies name the installed binary and file.
#
# Set by the caller: HUBD_SOURCE_DIR, HUBD_BINARY_DIR, HUBD_SBINDIR,
# HUBD_SYSCONFDIR, HUBD_MANDIR, HUBD_SYSTEMD_UNITDIR.

set(_prefix "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "(.)/+$" "\\1" _prefix "${_prefix}")

if(IS_ABSOLUTE "${HUBD_SYSCONFDIR}")
  set(_etc "${HUBD_SYSCONFDIR}")
elseif(_prefix STREQUAL "/usr" OR _prefix STREQUAL "/")
  set(_etc "/${HUBD_SYSCONFDIR}")
else()
  set(_etc "${_prefix}/${HUBD_SYSCONFDIR}")
endif()

if(HUBD_SYSTEMD_UNITDIR STREQUAL "")
  if(_prefix STREQUAL "/usr")
    set(_unitdir "/lib/systemd/system")
  else()
    set(_unitdir "${_prefix}/lib/systemd/system")
  endif()
elseif(IS_ABSOLUTE "${HUBD_SYSTEMD_UNITDIR}")
  set(_unitdir "${HUBD_SYSTEMD_UNITDIR}")
else()
  set(_unitdir "${_prefix}/${HUBD_SYSTEMD_UNITDIR}")
endif()

if(IS_ABSOLUTE "${HUBD_SBINDIR}")
  set(_sbin "${HUBD_SBINDIR}")
else()
  set(_sbin "${_prefix}/${HUBD_SBINDIR}")
endif()
if(IS_ABSOLUTE "${HUBD_MANDIR}")
  set(_man "${HUBD_MANDIR}")
else()
  set(_man "${_prefix}/${HUBD_MANDIR}")
endif()

set(_stage "${HUBD_BINARY_DIR}/hubd-install")
file(MAKE_DIRECTORY "${_stage}")

# Units: the source text, with the two paths rewritten if they differ.
foreach(_unit hubd.service hubd.socket)
  file(READ "${HUBD_SOURCE_DIR}/systemd/${_unit}" _text)
  string(REPLACE "/usr/sbin/hubd" "${_sbin}/hubd" _text "${_text}")
  string(REPLACE "/etc/hubd/hubd.conf" "${_etc}/hubd/hubd.conf" _text "${_text}")
  file(WRITE "${_stage}/${_unit}" "${_text}")
endforeach()
file(INSTALL DESTINATION "${_unitdir}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${_stage}/hubd.service" "${_stage}/hubd.socket")

file(INSTALL DESTINATION "${_prefix}/lib/sysusers.d" TYPE FILE
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     RENAME hubd.conf FILES "${HUBD_SOURCE_DIR}/systemd/hubd.sysusers")

# Configuration: a locally edited file is kept (packages handle it through
# dpkg's conffile mechanism instead).
set(_conf "$ENV{DESTDIR}${_etc}/hubd/hubd.conf")
if(EXISTS "${_conf}")
  file(READ "${_conf}" _old)
  file(READ "${HUBD_SOURCE_DIR}/etc/hubd.conf" _new)
  if(NOT _old STREQUAL _new)
    message(STATUS "Keeping locally modified: ${_conf}")
    set(_keep_conf TRUE)
  endif()
endif()
if(NOT _keep_conf)
  file(INSTALL DESTINATION "${_etc}/hubd" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "${HUBD_SOURCE_DIR}/etc/hubd.conf")
endif()

# /usr/share/doc/hubd: the copyright file and the changelog (gzip -9n), as
# Debian policy asks of every package.
set(_doc "${_prefix}/share/doc/hubd")
execute_process(COMMAND gzip -9n -c "${HUBD_SOURCE_DIR}/systemd/deb/changelog"
                OUTPUT_FILE "${_stage}/changelog.gz" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "gzip of systemd/deb/changelog failed: ${_rc}")
endif()
file(INSTALL DESTINATION "${_doc}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${HUBD_SOURCE_DIR}/systemd/deb/copyright" "${_stage}/changelog.gz")

# Man pages, compressed as Debian policy asks (gzip -9n: reproducible).
foreach(_page hubd.8 hubd.conf.5 hubctl.1)
  string(REGEX REPLACE ".*\\." "" _section "${_page}")
  execute_process(COMMAND gzip -9n -c "${HUBD_SOURCE_DIR}/docs/man/${_page}"
                  OUTPUT_FILE "${_stage}/${_page}.gz" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "gzip of docs/man/${_page} failed: ${_rc}")
  endif()
  file(INSTALL DESTINATION "${_man}/man${_section}" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${_stage}/${_page}.gz")
endforeach()
