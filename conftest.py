# The project's own test suite uses pytester to run the plugin in throw-away projects.
pytest_plugins = ["pytester"]
