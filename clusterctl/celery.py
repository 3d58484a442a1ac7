"""The Celery app, configured from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterctl.settings")

# The broker connections reconnect every second or two (clusterctl/broker.py).
app = Celery("clusterctl", amqp="clusterctl.broker:AMQP")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
