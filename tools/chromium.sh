#!/bin/sh
# tools/chromium.sh find|install — the Chromium (or Google Chrome) the
# browser test of the local web view drives (headless, through chromedp).
#
#   find     prints the path of the one to use and exits 0, or exits 1:
#            RUNSTWICE_CHROMIUM when set; else the first of chromium,
#            chromium-browser, google-chrome, google-chrome-stable on the
#            PATH; else the app in /Applications or ~/Applications (macOS).
#   install  uses the one found; only when there is none, installs Debian's
#            chromium (apt-get, with sudo unless root) on Debian, and says
#            what to install anywhere else.
#
# `make chromium` runs install; the browser test runs find.
set -eu

find_chromium() {
	if [ -n "${RUNSTWICE_CHROMIUM:-}" ]; then
		if [ -x "$RUNSTWICE_CHROMIUM" ]; then
			printf '%s\n' "$RUNSTWICE_CHROMIUM"
			return 0
		fi
		echo "RUNSTWICE_CHROMIUM=$RUNSTWICE_CHROMIUM is not an executable file" >&2
		return 1
	fi
	for name in chromium chromium-browser google-chrome google-chrome-stable; do
		if path=$(command -v "$name" 2>/dev/null); then
			printf '%s\n' "$path"
			return 0
		fi
	done
	for dir in /Applications "${HOME:-/nonexistent}/Applications"; do
		for app in "Chromium.app/Contents/MacOS/Chromium" "Google Chrome.app/Contents/MacOS/Google Chrome"; do
			if [ -x "$dir/$app" ]; then
				printf '%s\n' "$dir/$app"
				return 0
			fi
		done
	done
	return 1
}

say_what_to_install() {
	case "$(uname -s)" in
	Darwin) how="brew install --cask google-chrome (or chromium), or Google Chrome from google.com/chrome" ;;
	*) how="your distribution's chromium package (Fedora: dnf install chromium; Arch: pacman -S chromium; Ubuntu: snap install chromium), or Google Chrome" ;;
	esac
	echo "make chromium: no Chromium or Google Chrome on this machine, which the browser test of the web view needs." >&2
	echo "  Install one: $how;" >&2
	echo "  or point RUNSTWICE_CHROMIUM at its executable." >&2
	exit 1
}

install_chromium() {
	if path=$(find_chromium); then
		echo "==> chromium: $path"
		return 0
	fi
	[ -n "${RUNSTWICE_CHROMIUM:-}" ] && exit 1
	id=""
	if [ -r /etc/os-release ]; then
		id=$(. /etc/os-release && printf '%s' "${ID:-}")
	fi
	if [ "$(uname -s)" != Linux ] || [ "$id" != debian ] || ! command -v apt-get >/dev/null 2>&1; then
		say_what_to_install
	fi
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	# Tested with 156.0.8078.114-1~deb12u1 (Debian 12, bookworm-security). The
	# Debian release is the pin: its mirror keeps only the newest security
	# build, so an exact version would stop installing at the next update.
	echo "==> installing chromium from Debian's packages (no Chromium found)"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/tmp/chromium-install.$$ 2>&1 ||
		{ cat /tmp/chromium-install.$$ >&2; rm -f /tmp/chromium-install.$$; exit 1; }
	rm -f /tmp/chromium-install.$$
	echo "==> chromium: $(find_chromium) ($(dpkg-query -W -f='${Version}' chromium))"
}

case "${1:-}" in
find) find_chromium ;;
install) install_chromium ;;
*)
	echo "usage: tools/chromium.sh find|install" >&2
	exit 2
	;;
esac
