//! `/v1/openapi.json`: the OpenAPI 3.1 document, generated from the handlers and types by `utoipa`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::{branches, databases, health, operations, projects, views};

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(title = "Cambium", description = "Databases with instant copy-on-write branches and point-in-time restore."),
    paths(
        projects::list, projects::create, projects::get, projects::update, projects::delete, projects::audit,
        databases::list, databases::create, databases::get, databases::update, databases::delete,
        databases::resume, databases::suspend, databases::reset_password, databases::endpoints, health::get,
        branches::list, branches::create, branches::get, branches::update, branches::delete, branches::restore,
        branches::reset, branches::schema_diff,
        operations::list, operations::get,
    ),
    components(schemas(views::ErrorEnvelope)),
    modifiers(&Common),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

/// What every operation shares: the bearer key scheme, and the error envelope for 5XX answers (500, and 503
/// when the storage does not answer).
struct Common;

impl Modify for Common {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        let server_error: RefOr<Response> = ResponseBuilder::new()
            .description("The service failed (500) or the storage did not answer (503); the error envelope.")
            .content(
                "application/json",
                Content::new(Some(Ref::from_schema_name("ErrorEnvelope"))),
            )
            .build()
            .into();
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.patch, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                operation
                    .responses
                    .responses
                    .entry("5XX".to_owned())
                    .or_insert_with(|| server_error.clone());
            }
        }
    }
}

/// Serves the document (no key needed).
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
