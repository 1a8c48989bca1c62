//! Shape C (Liqo v0.9.0 … v0.10.3): as shape B, but a read answers one resource
//! list per pool; this server answers a single pool, named as configured.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use liqo_proto::shape_c::{resource_reader_server, ClusterIdentity, Empty, PoolResourceList};
use tonic::{Request, Response, Status};

use super::adapter::{peer, Adapter};
use crate::reader::Notification;
use crate::wire;

pub(crate) struct ShapeC {
    pub(crate) adapter: Adapter,
    pub(crate) pool_name: String,
    pub(crate) pool_prefix: String,
}

impl ShapeC {
    fn adapter(&self) -> &Adapter {
        &self.adapter
    }
}

type Notifications = Pin<Box<dyn Stream<Item = Result<ClusterIdentity, Status>> + Send>>;

fn to_wire(n: Notification) -> Result<ClusterIdentity, Status> {
    Ok(ClusterIdentity {
        cluster_id: n.cluster_id().to_string(),
    })
}

#[tonic::async_trait]
impl resource_reader_server::ResourceReader for ShapeC {
    async fn read_resources(
        &self,
        request: Request<ClusterIdentity>,
    ) -> Result<Response<PoolResourceList>, Status> {
        let originator = request.into_inner().cluster_id;
        let list = self.adapter().read(&originator).await?;
        Ok(Response::new(wire::to_shape_c(
            &list,
            &self.pool_name,
            &self.pool_prefix,
        )))
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
