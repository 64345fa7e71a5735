# Sourced by the bench scripts: build_products CONFIG PRODUCT... builds each product, one `swift build` each
# (it honours only the last --product flag), printing each build's last line; when one fails, its whole output
# goes to stderr (a missing -dev package or a compile error), and the caller's `set -e` stops the script.
build_products() {
    local config=$1 product
    shift
    for product in "$@"; do build_product "$config" "$product"; done
}

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
