"""``python -m api``: run the service with settings from the environment."""

from api import serve

serve()
