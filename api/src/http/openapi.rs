//! `/v1/openapi.json`: the OpenAPI 3.1 document, generated from the handlers and types by `utoipa`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{branches, databases, operations, projects, views};

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(title = "Cambium", description = "Databases with instant copy-on-write branches and point-in-time restore."),
    paths(
        projects::list, projects::create, projects::get, projects::update, projects::delete,
        databases::list, databases::create, databases::get, databases::update, databases::delete,
        databases::resume, databases::suspend, databases::endpoints,
        branches::list, branches::create, branches::get, branches::update, branches::delete, branches::restore,
        operations::list, operations::get,
    ),
    components(schemas(views::ErrorEnvelope)),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

/// Declares the bearer key scheme.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Serves the document (no key needed).
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
