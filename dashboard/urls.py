"""The dashboard's pages (docs/dashboard.md "Pages"), the sign-in pages, and the alert acknowledgement."""

from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import plan_views, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("my/", views.my_page, name="my"),
    path("my/jobs/<int:job_id>/", views.my_job_page, name="my-job"),
    path("legend.css", views.legend_css, name="legend-css"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("accounts/login/", views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("clusters/<int:cluster_id>/fabric/", views.fabric_page, name="fabric"),
    path(
        "clusters/<int:cluster_id>/fabric/links/<int:link_id>/history/",
        views.link_history,
        name="fabric-link-history",
    ),
    path("clusters/<int:cluster_id>/gpus/", views.gpus_page, name="gpus"),
    path("clusters/<int:cluster_id>/queue/", views.queue_page, name="queue"),
    path("clusters/<int:cluster_id>/jobs/<int:job_id>/", views.job_page, name="job"),
    path("clusters/<int:cluster_id>/jobs/<int:job_id>/series/", views.job_series, name="job-series"),
    path("clusters/<int:cluster_id>/alerts/", views.alerts_page, name="alerts"),
    path(
        "clusters/<int:cluster_id>/alerts/acknowledge-group/",
        views.acknowledge_alert_group,
        name="alert-group-acknowledge",
    ),
    path(
        "clusters/<int:cluster_id>/alerts/<int:alert_id>/acknowledge/",
        views.acknowledge_alert,
        name="alert-acknowledge",
    ),
    path("clusters/<int:cluster_id>/report/", views.report_page, name="report"),
    path("plan/", plan_views.plan_page, name="plan"),
    path("whatif/", views.whatif_page, name="whatif"),
    path("whatif/suite/", views.whatif_suite, name="whatif-suite"),  # before the run's slug
    path("whatif/<slug:run_id>/", views.whatif_run, name="whatif-run"),
    path("whatif/<slug:run_id>/status/", views.whatif_status, name="whatif-status"),
    path("whatif/<slug:run_id>/result.json", views.whatif_result, name="whatif-result"),
]
