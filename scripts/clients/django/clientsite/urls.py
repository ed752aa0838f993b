"""No views: the checks use the ORM and management commands only."""
urlpatterns: list = []
