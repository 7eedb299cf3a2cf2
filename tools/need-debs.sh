#!/bin/sh
# Installs the Debian packages a make target runs, and only those that are missing.
#   tools/need-debs.sh PROGRAM:PACKAGE...
# Names each missing program on one line with the command that installs it. As root it installs them
# (apt-get); as any other user it installs nothing and says what to run, rather than failing on apt's
# lock: a machine that has Prometheus and Alertmanager runs the demo without root.
# Only shell built-ins and `id`: the tests run it with a PATH of their own.
set -eu
missing=""
for pair in "$@"; do
  program=${pair%%:*}
  package=${pair#*:}
  if ! command -v "$program" >/dev/null 2>&1; then
    echo "$program is not installed: apt-get install $package"
    case " $missing " in *" $package "*) ;; *) missing="${missing:+$missing }$package" ;; esac
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "not root, so nothing installed: run sudo apt-get install -y --no-install-recommends $missing" >&2
  exit 1
fi
echo "installing Debian packages: $missing"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
