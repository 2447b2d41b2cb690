# bash completion for hubctl(1): commands, and the options of each.
# Installed as /usr/share/bash-completion/completions/hubctl.

_hubctl() {
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    case $prev in
    --socket)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --cache-dir | --local-dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    --repo-type)
        COMPREPLY=($(compgen -W "model dataset space" -- "$cur"))
        return
        ;;
    --format)
        COMPREPLY=($(compgen -W "auto human agent json quiet" -- "$cur"))
        return
        ;;
    --local-dir-use-symlinks)
        COMPREPLY=($(compgen -W "auto True False" -- "$cur"))
        return
        ;;
    --revision | --include | --exclude | --token | --max-workers)
        COMPREPLY=()
        return
        ;;
    -o)
        COMPREPLY=($(compgen -f -- "$cur") $([[ -z $cur || $cur == - ]] && echo -))
        return
        ;;
    --sha256 | -H | --header | --max-size)
        COMPREPLY=()
        return
        ;;
    esac
    # The command: the first word that is not an option (or --socket's value).
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --socket) ((i++)) ;;
        -*) ;;
        *)
            cmd=${COMP_WORDS[i]}
            break
            ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--socket --help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "fetch hf status stats ls cancel rm pin unpin gc verify fleet start stop doctor help" -- "$cur"))
        fi
        return
    fi
    local opts=""
    if [[ $cmd == hf && $cur != -* ]]; then
        # the subcommand, right after hf
        [[ ${COMP_WORDS[COMP_CWORD - 1]} == hf ]] && COMPREPLY=($(compgen -W "download ls rm" -- "$cur"))
        return
    fi
    if [[ $cmd == fleet && $cur != -* ]]; then
        [[ ${COMP_WORDS[COMP_CWORD - 1]} == fleet ]] && COMPREPLY=($(compgen -W "status" -- "$cur"))
        return
    fi
    case $cmd in
    hf) opts="--repo-type --revision --include --exclude --cache-dir --local-dir --token --warm --max-workers --force-download --dry-run --format --json --json-files -q --quiet --progress --local-dir-use-symlinks --resume-download --all --uid" ;;
    fetch) opts="--sha256 -H --header -o -q --json --progress --refresh" ;;
    status | ls | pin | unpin | verify | cancel | fleet) opts="--json" ;;
    rm) opts="--force --json" ;;
    help)
        # the command whose usage is asked for
        [[ $cur != -* ]] && COMPREPLY=($(compgen -W "fetch hf status stats ls cancel rm pin unpin gc verify fleet start stop doctor" -- "$cur"))
        return
        ;;
    stats) opts="--json --prometheus" ;;
    gc) opts="--max-size --json" ;;
    esac
    opts="$opts --help" # every command has its own
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -F _hubctl hubctl
