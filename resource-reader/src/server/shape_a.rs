//! Shape A (Liqo v0.5, the thesis design): string maps, empty notifications.
//!
//! Two things differ from the other shapes, both for Liqo v0.5's sake: a
//! transient read failure is answered from the last known answers (v0.5
//! withdraws the offer on any error; see the adapter's `LastKnown`), and a
//! subscription always ends with an error status, never cleanly — v0.5 never
//! subscribes again after a clean end of its stream, but retries after an
//! error.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use liqo_proto::shape_a::{
    resource_reader_server, ReadRequest, ReadResponse, RemoveRequest, RemoveResponse,
    SubscribeRequest, UpdateNotification,
};
use tonic::{Request, Response, Status};

use super::adapter::{peer, Adapter};
use crate::wire;

pub(crate) struct ShapeA(pub(crate) Adapter);

type Notifications = Pin<Box<dyn Stream<Item = Result<UpdateNotification, Status>> + Send>>;

#[tonic::async_trait]
impl resource_reader_server::ResourceReader for ShapeA {
    async fn read_resources(
        &self,
        request: Request<ReadRequest>,
    ) -> Result<Response<ReadResponse>, Status> {
        let originator = request.into_inner().originator;
        let list = self.0.read(&originator).await?;
        Ok(Response::new(wire::to_shape_a(&list)))
    }

    type SubscribeStream = Notifications;

    async fn subscribe(
        &self,
        request: Request<SubscribeRequest>,
    ) -> Result<Response<Notifications>, Status> {
        let stream = self
            .0
            .notifications(peer(&request))
            .map(|_| Ok(UpdateNotification {}))
            .chain(futures::stream::once(async {
                Err(Status::unavailable(
                    "the ResourceReader is going away: subscribe again",
                ))
            }));
        Ok(Response::new(stream.boxed()))
    }

    async fn remove_cluster(
        &self,
        request: Request<RemoveRequest>,
    ) -> Result<Response<RemoveResponse>, Status> {
        self.0.remove_cluster(&request.into_inner().cluster).await?;
        Ok(Response::new(RemoveResponse {}))
    }
}
