#!/usr/bin/env bash
# Tab completion (completions/jfsops.bash, completions/_jfsops) against the
# binary and the source, so completion, --help and the option tables cannot
# drift:
#  - `jfsops <TAB>` offers exactly `jfsops --list-commands` + help;
#  - for every command, `jfsops CMD --<TAB>` offers exactly the long options
#    of the command's option table (as the binary dumps it: `jfsops help
#    --options-json CMD`), both ways;
#  - every offered flag is accepted by the binary (no "unknown option");
#  - `jfsops-CMD --<TAB>` (the installed links) offers the same;
#  - value completion: lance --format, the global --log-level;
#  - zsh: the file loads under `zsh -f` + compinit and defines _jfsops;
#  - installed (`cmake --install` of the binary's build dir into a scratch
#    prefix): a new interactive bash, set up as Debian sets up a new user's
#    (~/.bashrc from /etc/skel, which loads bash-completion), completes
#    `jfsops-CMD --<TAB>` for every link: bash-completion loads completions
#    lazily by command name, so each link needs its own file.
# Every mismatch is listed; the test fails if there is any.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BIN=${JFSOPS_BIN:-$repo/build/jfsops}
[ -x "$BIN" ] || { echo "FATAL: $BIN missing (set JFSOPS_BIN)" >&2; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/jo-compl.XXXXXX")
trap 'rm -rf "$T"' EXIT
# the completion calls `jfsops` by the name on the command line: put the
# binary under test (and a jfsops-CMD link) first on PATH
mkdir -p "$T/bin"
ln -s "$BIN" "$T/bin/jfsops"
for c in $("$BIN" --list-commands); do ln -s "$BIN" "$T/bin/jfsops-$c"; done
export PATH="$T/bin:$PATH"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# complete LINE: the words bash completion offers for the command line LINE
# (completion at its end; a trailing space starts a new word)
complete_line() {
	bash --norc --noprofile -c '
		. "$1"
		line=$2
		read -r -a COMP_WORDS <<<"$line"
		[[ $line == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE=$line
		COMP_POINT=${#line}
		fn=$(complete -p "${COMP_WORDS[0]}" 2>/dev/null | grep -oE -- "-F [^ ]+" | cut -d" " -f2)
		[ -n "$fn" ] || { echo "no completion registered for ${COMP_WORDS[0]}" >&2; exit 3; }
		"$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}"
	' _ "$repo/completions/jfsops.bash" "$1" | sed '/^$/d' | sort -u
}

# diff_sets NAME EXPECTED_FILE GOT_FILE
diff_sets() {
	if ! cmp -s "$2" "$3"; then
		fail "$1: completion and expected set differ"
		comm -23 "$2" "$3" | sed 's/^/    missing from completion: /'
		comm -13 "$2" "$3" | sed 's/^/    offered but not expected: /'
	fi
}

# 1. command list
{ "$BIN" --list-commands; echo help; } | sort -u >"$T/cmds.want"
complete_line "jfsops " >"$T/cmds.got"
diff_sets "jfsops <TAB>" "$T/cmds.want" "$T/cmds.got"
complete_line "jfsops --log-level debug " >"$T/cmds2.got"
diff_sets "jfsops --log-level debug <TAB>" "$T/cmds.want" "$T/cmds2.got"
printf '%s\n' debug error info warn >"$T/lvl.want"
complete_line "jfsops --log-level " >"$T/lvl.got"
diff_sets "jfsops --log-level <TAB>" "$T/lvl.want" "$T/lvl.got"
complete_line "jfsops help " >"$T/help.got"
"$BIN" --list-commands | sort -u >"$T/help.want"
diff_sets "jfsops help <TAB>" "$T/help.want" "$T/help.got"
ncmd=$(wc -l <"$T/help.want")
[ "$ncmd" -ge 1 ] || fail "jfsops --list-commands printed nothing"

# 2. flags of every command
for c in $("$BIN" --list-commands); do
	if ! "$BIN" help --options-json "$c" 2>/dev/null | python3 -c 'import json, sys
opts = [o["long"] for o in json.load(sys.stdin)["options"] if not o["hidden"]]
print("\n".join("--" + o for o in sorted(opts)))
sys.exit(0 if opts else 1)' >"$T/$c.src"; then
		fail "$c: cannot read its option table from the binary"
		continue
	fi
	complete_line "jfsops $c --" >"$T/$c.got"
	diff_sets "jfsops $c --<TAB> vs the option table of cmd_$c" "$T/$c.src" "$T/$c.got"
	complete_line "jfsops-$c --" >"$T/$c.link"
	cmp -s "$T/$c.got" "$T/$c.link" || fail "jfsops-$c --<TAB> differs from jfsops $c --<TAB>"
	# every offered flag is accepted: an unknown one is refused before --help
	# is acted on, so probe each flag alone with a dummy value where it takes
	# one
	while read -r f; do
		[ "$f" = --help ] && continue
		out=$(timeout 10 "$BIN" "$c" "$f" x --help </dev/null 2>&1 >/dev/null; true)
		case $out in
		*"unrecognized option"* | *"unknown option"* | *"unrecognised option"*)
			fail "jfsops $c $f: the binary says: $(echo "$out" | head -n 1)" ;;
		esac
	done <"$T/$c.got"
done

# 3. values
printf '%s\n' csv jsonl juicefs ranges >"$T/fmt.want"
if "$BIN" --list-commands | grep -qx lance; then
	complete_line "jfsops lance ds --format " >"$T/fmt.got"
	diff_sets "jfsops lance --format <TAB>" "$T/fmt.want" "$T/fmt.got"
else
	fail "lance is not in --list-commands (value completion of --format untested)"
fi

# 4. zsh
if command -v zsh >/dev/null; then
	out=$(HOME=$T zsh -f -c '
		fpath=('"$repo"'/completions $fpath)
		autoload -Uz compinit && compinit -u -d '"$T"'/zcompdump
		autoload -Uz _jfsops
		(( $+functions[_jfsops] )) || { echo "no _jfsops after autoload"; exit 1; }
		[[ ${_comps[jfsops]} == _jfsops ]] || { echo "jfsops is not bound to _jfsops: ${_comps[jfsops]}"; exit 1; }
		[[ ${_patcomps[jfsops-*]} == _jfsops ]] || { echo "jfsops-* links are not bound to _jfsops"; exit 1; }
		# the helper that turns --help into _arguments specs
		_jfsops_help_flags() { :; }
		unfunction _jfsops_help_flags
		autoload +X _jfsops 2>/dev/null
		echo loaded
	' 2>&1)
	[ "$out" = loaded ] || fail "zsh: $out"
	# the flag extraction of the zsh file yields the same flag set as bash
	for c in $("$BIN" --list-commands); do
		HOME=$T zsh -f -c '
			source <(sed "/^_jfsops \"\$@\"$/d" '"$repo"'/completions/_jfsops)
			_jfsops_help_flags jfsops '"$c"'
		' 2>&1 | sed 's/ .*//' | sort -u >"$T/$c.zsh"
		cmp -s "$T/$c.zsh" "$T/$c.got" || {
			fail "zsh: flags of $c differ from the bash completion's"
			diff "$T/$c.got" "$T/$c.zsh" | sed 's/^/    /'
		}
	done
else
	fail "zsh is not installed (apt-get install zsh; tests/install.sh)"
fi

# 5. the installed completion, in a new interactive shell
BUILD=${JFSOPS_BUILD:-$(dirname "$BIN")}
BC=/usr/share/bash-completion/bash_completion
if [ ! -f "$BUILD/cmake_install.cmake" ]; then
	fail "$BUILD is not the CMake build directory of $BIN (set JFSOPS_BUILD)"
elif [ ! -f "$BC" ]; then
	fail "bash-completion is not installed (apt-get install bash-completion; tests/install.sh)"
elif ! cmake --install "$BUILD" --prefix "$T/prefix" >"$T/install.log" 2>&1; then
	fail "cmake --install failed: $(tail -n 3 "$T/install.log")"
else
	mkdir -p "$T/home"
	if [ -f /etc/skel/.bashrc ]; then
		cp /etc/skel/.bashrc "$T/home/.bashrc"
	else
		printf '. %s\n' "$BC" >"$T/home/.bashrc"
	fi
	grep -q bash_completion "$T/home/.bashrc" || printf '. %s\n' "$BC" >>"$T/home/.bashrc"
	for c in $("$BIN" --list-commands); do
		# what bash does on the first TAB after "jfsops-CMD --": no completion is
		# registered yet, so it calls the default one (complete -D), which loads
		# the file named after the command and asks for a retry (124)
		env -i HOME="$T/home" TERM=dumb PATH="$T/prefix/bin:/usr/bin:/bin" \
			XDG_DATA_DIRS="$T/prefix/share:/usr/share" \
			bash -i -c '
			cmd=jfsops-$1
			if complete -p "$cmd" >/dev/null 2>&1; then echo "ALREADY: $cmd is registered before the first TAB"; exit 0; fi
			dflt=$(complete -p -D 2>/dev/null | grep -oE -- "-F [^ ]+" | cut -d" " -f2)
			[ -n "$dflt" ] || { echo "NOLOADER: bash-completion did not load (no complete -D)"; exit 0; }
			COMP_WORDS=("$cmd" --); COMP_CWORD=1; COMP_LINE="$cmd --"; COMP_POINT=${#COMP_LINE}
			"$dflt" "$cmd" -- "$cmd"
			fn=$(complete -p "$cmd" 2>/dev/null | grep -oE -- "-F [^ ]+" | cut -d" " -f2)
			[ "$fn" = _jfsops ] || { echo "NOTLOADED: after the loader, $cmd completes with ${fn:-nothing}"; exit 0; }
			COMPREPLY=()
			"$fn" "$cmd" -- "$cmd"
			printf "%s\n" "${COMPREPLY[@]}"
		' _ "$c" 2>/dev/null | sed '/^$/d' | sort -u >"$T/$c.installed"
		if grep -qE '^(ALREADY|NOLOADER|NOTLOADED):' "$T/$c.installed"; then
			fail "installed, new shell: $(grep -E '^(ALREADY|NOLOADER|NOTLOADED):' "$T/$c.installed")"
		else
			cmp -s "$T/$c.got" "$T/$c.installed" ||
				fail "installed, new shell: jfsops-$c --<TAB> offers $(wc -l <"$T/$c.installed") words, jfsops $c --<TAB> $(wc -l <"$T/$c.got")"
		fi
	done
fi

if [ "$fails" -gt 0 ]; then
	echo "completions: $fails failure(s)"
	exit 1
fi
echo "completions: ok ($ncmd commands)"
