"""Brokers for other task libraries, on Disque: ``dramatiq.py`` (Dramatiq's
broker and result backend) and ``kombu.py`` (a kombu transport: Celery)."""
