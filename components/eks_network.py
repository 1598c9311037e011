"""The VPC an EKS host gets when the stack names no existing one.

Public subnets (load balancers, one NAT gateway) and private subnets (all nodes) across the
first N availability zones of the region. One NAT gateway keeps a lab-sized site cheap; a
production site usually brings its own VPC through ``cluster.eks.vpcId``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from config.vocabulary import EKS_NETWORK_COMPONENT


@dataclass
class EksNetworkArgs:
    cidr: str
    availability_zones: int
    cluster_name: str


class EksNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]

    def __init__(self, name: str, args: EksNetworkArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(EKS_NETWORK_COMPONENT, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_tag = f"kubernetes.io/cluster/{args.cluster_name}"
        zones = aws.get_availability_zones_output(state="available", opts=pulumi.InvokeOutputOptions(parent=self))
        # /20 blocks: the first N for public subnets, the next N for private ones.
        blocks = list(ipaddress.ip_network(args.cidr).subnets(new_prefix=20))

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={"Name": f"{args.cluster_name}-vpc"}, opts=child)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, opts=child)
        public_routes = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id, routes=[
            aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)], opts=child)

        public, private = [], []
        for index in range(args.availability_zones):
            zone = zones.names[index]
            subnet = aws.ec2.Subnet(f"{name}-public-{index}", vpc_id=vpc.id, availability_zone=zone,
                                    cidr_block=str(blocks[index]), map_public_ip_on_launch=True,
                                    tags={cluster_tag: "shared", "kubernetes.io/role/elb": "1"}, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{index}", subnet_id=subnet.id,
                                          route_table_id=public_routes.id, opts=child)
            public.append(subnet)

        nat_ip = aws.ec2.Eip(f"{name}-nat", domain="vpc", opts=child)
        nat = aws.ec2.NatGateway(f"{name}-nat", subnet_id=public[0].id, allocation_id=nat_ip.id, opts=child)
        private_routes = aws.ec2.RouteTable(f"{name}-private", vpc_id=vpc.id, routes=[
            aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)], opts=child)
        for index in range(args.availability_zones):
            subnet = aws.ec2.Subnet(f"{name}-private-{index}", vpc_id=vpc.id, availability_zone=zones.names[index],
                                    cidr_block=str(blocks[args.availability_zones + index]),
                                    tags={cluster_tag: "shared", "kubernetes.io/role/internal-elb": "1"}, opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{index}", subnet_id=subnet.id,
                                          route_table_id=private_routes.id, opts=child)
            private.append(subnet)

        self.vpc_id = vpc.id
        self.public_subnet_ids = [subnet.id for subnet in public]
        self.private_subnet_ids = [subnet.id for subnet in private]
        self.register_outputs({"vpcId": self.vpc_id, "publicSubnetIds": self.public_subnet_ids,
                               "privateSubnetIds": self.private_subnet_ids})
