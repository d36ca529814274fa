#!/bin/sh
# Stands in for nvidia-smi on a machine whose driver sees no GPU: what the real one prints
# there, and its exit status.
echo "No devices were found"
exit 6
