# shellcheck shell=bash
# tests/integration/lib/init.sh: the opening every integration script shares.
#
#   . "$(dirname "$0")/lib/init.sh" [engines] [LIB...]
#
# turns on set -euo pipefail, sets $here to the script's directory, sources
# tests/lib/services.sh, then tests/lib/engines.sh for "engines" and
# tests/integration/lib/LIB.sh for every other LIB, in the order given, and
# runs jo_setup ($JO_T, $JO_BIN, the EXIT trap that stops every service).
# A script that wants another default port base sets JO_PORT_BASE before it
# sources this file. LIB names a library of this folder ("gc" for gc.sh).
# Bash hands a file sourced without arguments the script's own: a script
# that takes arguments must name at least one library here (an argument that
# names no library stops the script).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../lib/services.sh
. "$here/../lib/services.sh"
for _jo_lib in "$@"; do
	case $_jo_lib in
	engines) . "$here/../lib/engines.sh" ;;
	*)
		[ -f "$here/lib/$_jo_lib.sh" ] || jo_die "lib/init.sh: no library '$_jo_lib' in $here/lib"
		. "$here/lib/$_jo_lib.sh"
		;;
	esac
done
unset _jo_lib
jo_setup
