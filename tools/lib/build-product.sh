# Sourced by the bench scripts: build_product CONFIG PRODUCT builds one product (`swift build` honours only
# the last --product flag) and prints its last line; when the build fails, its whole output goes to stderr
# (a missing -dev package or a compile error), and the caller's `set -e` stops the script.
build_product() {
    local log
    log=$(mktemp /tmp/build-product.XXXXXX)
    if swift build -c "$1" --product "$2" >"$log" 2>&1; then
        tail -n 1 "$log"
        rm -f "$log"
    else
        cat "$log" >&2
        echo "build of $2 ($1) failed; tools/bootstrap installs the packages a fresh machine lacks" >&2
        rm -f "$log"
        return 1
    fi
}
