#!/usr/bin/env python3
"""Django's command-line utility for the clients checks' tiny project (database from CLIENTS_URI)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clientsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
