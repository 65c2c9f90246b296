# bash completion for roomctl (control API 1). Install as
#   /usr/share/bash-completion/completions/roomctl
# or source it from ~/.bashrc. The subcommand list matches `roomctl --help`
# (Tests/RoomControlTests checks that every subcommand is listed here).

_roomctl() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion || return
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
        prev="${COMP_WORDS[COMP_CWORD-1]}"
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local subcommands="status join leave listen unlisten call answer decline hangup hold resume dtmf bridge unbridge mute unmute toggle-mute raise-hand lower-hand step-down
        accept-invite decline-invite approve deny invite demote mute-participant kick participants
        volume send-message set-attribute profile stats selftest log-level reload version events wait help"
    local events="connection joined participant_joined participant_left participant_updated stage mute
        invited stage_request active_speakers message attribute token_will_expire removed request_failed
        media_path device talker quality listen call dtmf config levels"

    case "$prev" in
        --socket)
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --timeout|--count|--reason|--to|--server|--token|--gain)
            return ;;
        --role)
            COMPREPLY=($(compgen -W "audience streamer" -- "$cur"))
            return ;;
        --backend)
            COMPREPLY=($(compgen -W "roomserver janus" -- "$cur"))
            return ;;
        --pin)
            return ;;
        --event|-e)
            COMPREPLY=($(compgen -W "$events" -- "$cur"))
            return ;;
    esac

    # Find the subcommand (the first word that is not an option or an option's value).
    local i sub=""
    for ((i = 1; i < cword; i++)); do
        case "${words[i]}" in
            --socket) ((i++)) ;;
            -*) ;;
            *) sub="${words[i]}"; break ;;
        esac
    done

    if [[ -z "$sub" ]]; then
        COMPREPLY=($(compgen -W "$subcommands --socket --json --help --version" -- "$cur"))
        return
    fi

    local opts="--help --json --socket"
    case "$sub" in
        join) opts+=" --server --token-file --role" ;;
        kick) opts+=" --reason" ;;
        send-message) opts+=" --to" ;;
        events) opts+=" --event --levels --count --timeout" ;;
        wait)
            opts+=" --timeout"
            if [[ "$cur" != -* ]]; then
                COMPREPLY=($(compgen -W "joined on-stage muted unmuted connected" -- "$cur"))
                return
            fi ;;
        profile)
            [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "speech music" -- "$cur")); return; } ;;
        log-level)
            [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "error warning notice info debug" -- "$cur")); return; } ;;
        help)
            COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
            return ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}

complete -F _roomctl roomctl
