from scheduler.api import views

routes = [
    ("jobs", views.JobViewSet, "job"),
    ("quotas", views.QuotaViewSet, "quota"),
    ("pools", views.PoolViewSet, "pool"),
]
urlpatterns: list = []
