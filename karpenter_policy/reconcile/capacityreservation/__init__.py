"""What happens to a node launched into a capacity reservation afterwards (aws v1.14.1
pkg/controllers/capacityreservation/): `capacitytype` relabels it on-demand once EC2 moved its instance out of the
reservation, `expiration` deletes it ahead of its capacity block's end."""
