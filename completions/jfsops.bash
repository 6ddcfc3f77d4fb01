# bash completion for jfsops and its jfsops-<command> links.
#
# Commands and flags are read from the binary itself (`jfsops --list-commands`
# and `jfsops CMD --help`), so this file cannot drift from the command table.
# Values are completed where the help names them: a flag documented as
# `--format jsonl|csv|ranges|juicefs` completes those words; FILE/DIR/PATH arguments
# complete file names.

_jfsops_help_cache=()

_jfsops_help() {
	# $1 binary, $2 command; cached per shell
	local key="$1 $2" i
	for ((i = 0; i < ${#_jfsops_help_cache[@]}; i += 2)); do
		if [[ ${_jfsops_help_cache[i]} == "$key" ]]; then
			printf '%s' "${_jfsops_help_cache[i+1]}"
			return
		fi
	done
	local h
	h=$("$1" "$2" --help 2>/dev/null)
	_jfsops_help_cache+=("$key" "$h")
	printf '%s' "$h"
}

_jfsops_flags() {
	# every --flag on the option lines of the help (lines that start with
	# "  -x, --flag" or "      --flag"; a line may name several flags),
	# before the Examples section
	_jfsops_help "$1" "$2" | sed '/^Examples:/,$d' | grep -E '^ +(-[a-zA-Z], )?--[a-z0-9]' |
		grep -oE -- '(^|[ ,])--[a-z0-9][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+' | sort -u
}

_jfsops_values() {
	# the words of "--flag a|b|c" in the help, if any
	_jfsops_help "$1" "$2" | grep -oE -- "$3 [a-z0-9]+(\|[a-z0-9]+)+" | head -n 1 |
		sed -e "s/^$3 //" -e 's/|/ /g'
}

_jfsops() {
	local cur prev bin cmd i words
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	bin=${COMP_WORDS[0]}
	cmd=
	case ${bin##*/} in
	jfsops-*) cmd=${bin##*/jfsops-}; cmd=${cmd#jfsops-}; bin=${bin%-*} ;;
	esac
	command -v "$bin" >/dev/null 2>&1 || return 0
	if [[ -z $cmd ]]; then
		for ((i = 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--log-level) ((i++)) ;;   # skip its value
			-*) ;;
			*) cmd=${COMP_WORDS[i]}; break ;;
			esac
		done
	fi
	if [[ -z $cmd || $cmd == help ]]; then
		if [[ -z $cmd && $prev == --log-level ]]; then
			COMPREPLY=($(compgen -W "error warn info debug" -- "$cur"))
		elif [[ $cur == -* ]]; then
			[[ -z $cmd ]] && COMPREPLY=($(compgen -W "--help --version --log-level --list-commands" -- "$cur"))
		elif [[ $cmd != help || $prev == help ]]; then
			words=$("$bin" --list-commands 2>/dev/null)
			[[ -z $cmd ]] && words="$words help"
			COMPREPLY=($(compgen -W "$words" -- "$cur"))
		fi
		return 0
	fi
	if [[ $prev == --* ]]; then
		words=$(_jfsops_values "$bin" "$cmd" "$prev")
		if [[ -n $words ]]; then
			COMPREPLY=($(compgen -W "$words" -- "$cur"))
			return 0
		fi
		if _jfsops_help "$bin" "$cmd" | grep -qE -- "^ +(-[a-zA-Z], )?$prev [A-Z]"; then
			COMPREPLY=($(compgen -f -- "$cur"))
			return 0
		fi
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_jfsops_flags "$bin" "$cmd")" -- "$cur"))
		return 0
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}

complete -F _jfsops jfsops
for _c in $(jfsops --list-commands 2>/dev/null); do
	complete -F _jfsops "jfsops-$_c"
done
unset _c
