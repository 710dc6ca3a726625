def pytest_configure(config):
    config.addinivalue_line("markers", "install: builds the wheel and installs it into a fresh venv (1-3 minutes)")
