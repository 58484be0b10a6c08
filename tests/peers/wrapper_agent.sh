#!/bin/sh
# An agent behind a wrapper, as npm installs them: this script starts the real agent as a
# child and waits for it. Usage: wrapper_agent.sh PIDFILE PYTHON
# The child ignores SIGTERM, keeps running after its stdin closes and starts a child of
# its own; every process of the tree appends its pid to PIDFILE.
echo $$ >> "$1"
"$2" "$(dirname "$0")/lifecycle_agents.py" tree-child "$1"
