//! Shape B (Liqo v0.6 … v0.8): Kubernetes `Quantity` messages, notifications
//! naming a cluster (an empty `clusterID` means every cluster).

use std::pin::Pin;

use futures::{Stream, StreamExt};
use liqo_proto::shape_b::{resource_reader_server, ClusterIdentity, Empty, ResourceList};
use tonic::{Request, Response, Status};

use super::adapter::{peer, Adapter};
use crate::reader::Notification;
use crate::wire;

pub(crate) struct ShapeB(pub(crate) Adapter);

impl ShapeB {
    fn adapter(&self) -> &Adapter {
        &self.0
    }
}

type Notifications = Pin<Box<dyn Stream<Item = Result<ClusterIdentity, Status>> + Send>>;

fn to_wire(n: Notification) -> Result<ClusterIdentity, Status> {
    Ok(ClusterIdentity {
        cluster_id: n.cluster_id().to_string(),
    })
}

#[tonic::async_trait]
impl resource_reader_server::ResourceReader for ShapeB {
    async fn read_resources(
        &self,
        request: Request<ClusterIdentity>,
    ) -> Result<Response<ResourceList>, Status> {
        let originator = request.into_inner().cluster_id;
        let list = self.adapter().read(&originator).await?;
        Ok(Response::new(wire::to_shape_b(&list)))
    }

    type SubscribeStream = Notifications;

    async fn subscribe(&self, request: Request<Empty>) -> Result<Response<Notifications>, Status> {
        let stream = self.adapter().notifications(peer(&request)).map(to_wire);
        Ok(Response::new(stream.boxed()))
    }

    async fn remove_cluster(
        &self,
        request: Request<ClusterIdentity>,
    ) -> Result<Response<Empty>, Status> {
        self.adapter()
            .remove_cluster(&request.into_inner().cluster_id)
            .await?;
        Ok(Response::new(Empty {}))
    }
}
