# Writes OUTPUT.gz, the man page of fencepost(1), from BINARY's --help and
# --version: the help text verbatim in a no-fill block, between a name,
# a synopsis and the package's files.
#   cmake -DBINARY=PATH -DOUTPUT=PATH -P man_page.cmake
execute_process(COMMAND ${BINARY} --help OUTPUT_VARIABLE help
                RESULT_VARIABLE help_result)
execute_process(COMMAND ${BINARY} --version OUTPUT_VARIABLE version
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE version_result)
if(NOT help_result EQUAL 0 OR NOT version_result EQUAL 0)
  message(FATAL_ERROR "${BINARY} --help or --version failed")
endif()

# roff: a backslash is \e, a minus sign \-, and a line starting with a dot
# or a quote would be a request unless \& comes first.
string(REPLACE "\\" "\\e" help "${help}")
string(REPLACE "-" "\\-" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")

file(WRITE ${OUTPUT} ".TH FENCEPOST 1 \"\" \"${version}\" \"User Commands\"
.SH NAME
fencepost \\- a fencing\\-token guard in front of a key\\-value or file store
.SH SYNOPSIS
.B fencepost
.RB [ serve ]
.RI [ flags ]
.br
.B fencepost
.IR command \" ...\"
.SH DESCRIPTION
The text of
.BR \"fencepost \\-\\-help\" :
each subcommand prints its own with
.BR \\-\\-help .
.PP
.nf
${help}.fi
.SH FILES
.TP
.I /etc/default/fencepost
the service's settings, as FENCEPOST_* variables
.TP
.I /var/lib/fencepost
the service's data directory
.TP
.I /lib/systemd/system/fencepost.service
the systemd unit
.SH SEE ALSO
.BR systemctl (1),
.I /usr/share/doc/fencepost
")
execute_process(COMMAND gzip -9nf ${OUTPUT} RESULT_VARIABLE gzip_result)
if(NOT gzip_result EQUAL 0)
  message(FATAL_ERROR "gzip ${OUTPUT}: ${gzip_result}")
endif()
