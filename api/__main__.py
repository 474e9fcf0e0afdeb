"""``python -m api``: run the service with settings from the environment."""

from planner.api import serve

serve()
